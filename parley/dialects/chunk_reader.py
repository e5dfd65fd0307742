"""An OpenAI-compatible upstream's stream read into chat chunks, sans-IO.

``ChunkReader`` is fed the ``data:`` events of an OpenAI stream (``chat.completion.chunk``
or ``text_completion`` objects) in any split, and returns each read's chunks as dicts,
until ``[DONE]``. What a read holds before an error event, a malformed event or one past
the size bound is returned first, and the failure is recorded (``failure``), never
raised. It is the canonical reader of an OpenAI upstream (``Chained`` and the contract
suite use it as it is) and the reading half of ``OpenAIRelay``.

It runs once per upstream read, so it is lean: whole one-line ``data:`` events
(``SseParser.whole_data``) go to ``orjson`` as bytes, and only what is unusual goes
through the full parser and ``_chunk``'s rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from parley import upstream_json
from parley.dialects.translator import TRUNCATED, Failure
from parley.domain.usage import Usage
from parley.domain.wire import JSON
from parley.sse import EventTooLarge, SseParser

DONE = "[DONE]"
DONE_BYTES = b"[DONE]"


class ChunkParsing:
    """The reading of OpenAI ``data:`` events into chunks, which ``ChunkReader`` and
    ``OpenAIRelay`` share: ``done`` at ``[DONE]``, ``failure`` at an error, or at the
    body's end before ``[DONE]``."""

    __slots__ = ("_limit", "_parser", "done", "failure")

    def __init__(self, max_event_bytes: int) -> None:
        self._parser = SseParser(max_event_bytes)
        self._limit = max_event_bytes
        self.done = False
        self.failure: Failure | None = None

    def _ended(self) -> None:
        """The body ended: a stream without its ``[DONE]`` was cut short (``TRUNCATED``)."""
        if not self.done and self.failure is None:
            self.failure = TRUNCATED

    def _whole(self, payloads: list[bytes]) -> list[JSON]:
        """A read of whole ``data:`` events, each parsed."""
        batch: list[JSON] = []
        loads, shallow = orjson.loads, upstream_json.SHALLOW_BYTES
        for payload in payloads:
            if payload == DONE_BYTES:
                self.done = True
                return batch
            try:
                chunk: Any = loads(payload)
            except orjson.JSONDecodeError:
                chunk = None
            # ``upstream_json.loads``, written out: a chunk too deep to write back goes
            # to ``_chunk``, which refuses it.
            if (
                type(chunk) is not dict
                or "error" in chunk
                or (len(payload) > shallow and upstream_json.too_deep(payload))
            ):
                chunk = self._chunk(payload, named_error=False)
                if chunk is None:
                    if self.done or self.failure is not None:
                        return batch
                    continue
            batch.append(chunk)
        return batch

    def _parsed(self, data: bytes, parser: SseParser) -> list[JSON]:
        """A read ``whole_data`` did not take (partial lines, CR line ends, comments,
        named events), through the full parser."""
        batch: list[JSON] = []
        try:
            events, too_large = parser.feed(data), False
        except EventTooLarge as error:
            events, too_large = error.events, True
        for event in events:
            chunk = self._chunk(event.data, named_error=event.event == "error")
            if chunk is not None:
                batch.append(chunk)
            elif self.done or self.failure is not None:
                return batch
        if too_large:
            self.failure = Failure(too_large=True)
        return batch

    def _chunk(self, data: bytes | str, *, named_error: bool) -> JSON | None:
        """One event's chunk, by every rule: ``None`` for an event to skip (blank data), or
        when it ended the stream (``[DONE]``: ``done``; an error event, or a malformed
        one: ``failure``)."""
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        if text == DONE:
            self.done = True
            return None
        if not text or text.isspace():
            return None
        try:
            chunk = upstream_json.loads(text)
        except orjson.JSONDecodeError:
            chunk = None
        if not isinstance(chunk, dict):
            self.failure = Failure(malformed=True)
            return None
        if "error" in chunk or named_error:
            self.failure = Failure(payload=chunk)
            return None
        return chunk


class ChunkReader(ChunkParsing):
    """``ChunkTranslator[JSON]``: an OpenAI stream's bytes in, its chunks out."""

    __slots__ = ()

    def feed(self, data: bytes) -> list[JSON]:
        if self.done or self.failure is not None:
            return []
        parser = self._parser
        payloads = parser.whole_data(data)
        if payloads is None:
            return self._parsed(data, parser)
        return self._whole(payloads)

    def feed_chunks(self, chunks: Sequence[JSON]) -> list[JSON]:
        return [] if self.done or self.failure is not None else list(chunks)

    def end(self) -> list[JSON]:
        self._ended()
        return []

    def finish(self) -> list[JSON]:
        return []

    def delivered(self) -> Usage | None:
        return None
