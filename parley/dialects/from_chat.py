"""The reading half of a translator fed an OpenAI chat stream, sans-IO.

``FromChatChunks`` is what ``ChatToMessages`` and ``ChatToResponses`` share: it reads
the ``data:`` events of ``chat.completion.chunk`` objects (``[DONE]`` ends the stream, a
blank event is skipped, a malformed one or an ``error`` payload is the ``failure``, an
event past the size bound fails the stream after what came before it, and so does a
body that ends before ``[DONE]``), keeps the
upstream's usage and the stop, and counts what was delivered for the estimate. A
subclass writes its dialect's events: ``_start`` once, ``_delta`` for each choice's
delta, ``_finish`` at the end.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import orjson

from parley import upstream_json
from parley.dialects.canonical import Stop
from parley.dialects.openai_chat_reply import FINISH_TO_STOP, read_usage
from parley.dialects.translator import TRUNCATED, Failure, delivered_estimate, sse_data
from parley.domain.usage import Usage, with_estimate
from parley.domain.wire import JSON
from parley.sse import SseParser

DONE = "[DONE]"


class FromChatChunks(ABC):
    """``ChunkTranslator[bytes]``'s common part: chat chunks in, a subclass's events out."""

    __slots__ = (
        "_characters",
        "_parser",
        "_pieces",
        "_prompt_estimate",
        "_reported",
        "_started",
        "_stop",
        "done",
        "failure",
    )

    def __init__(self, prompt_estimate: int, max_event_bytes: int) -> None:
        self._prompt_estimate = prompt_estimate
        self._parser = SseParser(max_event_bytes)
        self._started = False
        self._stop: Stop | None = None
        """The last ``finish_reason`` read, as a canonical stop."""
        self._reported: Usage | None = None
        """The upstream's usage, when a chunk carried it."""
        self._characters = 0
        self._pieces = 0
        self.done = False
        self.failure: Failure | None = None

    def feed(self, data: bytes) -> list[bytes]:
        if self.done or self.failure is not None:
            return []
        out: list[bytes] = []
        payloads, too_large = sse_data(self._parser, data)
        self._events(payloads, out)
        if too_large and self.failure is None and not self.done:
            self.failure = Failure(too_large=True)
        return out

    def feed_chunks(self, chunks: Sequence[JSON]) -> list[bytes]:
        out: list[bytes] = []
        for chunk in chunks:
            if self.done or self.failure is not None:
                break
            self._chunk(chunk, out)
        return out

    def end(self) -> list[bytes]:
        if not self.done and self.failure is None:
            self.failure = TRUNCATED  # the upstream's body ended before ``[DONE]``
        return []

    def finish(self) -> list[bytes]:
        if self.done or self.failure is not None:
            return []
        out: list[bytes] = []
        self._finish(out)
        return out

    def delivered(self) -> Usage | None:
        estimate = delivered_estimate(self._prompt_estimate, self._characters, self._pieces)
        return with_estimate(self._reported, estimate)

    def _events(self, payloads: list[str], out: list[bytes]) -> None:
        for payload in payloads:
            if self.done or self.failure is not None:
                return
            if payload == DONE:
                self._finish(out)
                return
            if not payload or payload.isspace():
                continue
            try:
                chunk = upstream_json.loads(payload)
            except orjson.JSONDecodeError:
                chunk = None
            if not isinstance(chunk, dict):
                self.failure = Failure(malformed=True)
                return
            if "error" in chunk:
                self.failure = Failure(payload=chunk)
                return
            self._chunk(chunk, out)

    def _chunk(self, chunk: JSON, out: list[bytes]) -> None:
        if not self._started:
            self._start(out)
        usage = read_usage(chunk.get("usage"))
        if usage is not None:
            self._reported = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            self._delta(delta, out)
        finish = choice.get("finish_reason")
        if isinstance(finish, str):
            self._stop = FINISH_TO_STOP.get(finish, "end")

    @abstractmethod
    def _start(self, out: list[bytes]) -> None:
        """The stream's opening events; sets ``_started``."""

    @abstractmethod
    def _delta(self, delta: JSON, out: list[bytes]) -> None:
        """One chunk's ``delta``, written as the dialect's events."""

    @abstractmethod
    def _finish(self, out: list[bytes]) -> None:
        """The stream's closing events; sets ``done``."""
