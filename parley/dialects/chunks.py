"""The ``chat.completion.chunk`` objects a provider's stream reader writes, built one way.

Every reader of a non-OpenAI stream (``MessagesToChat``, ``GeminiToChat``,
``ConverseToChat``) turns its upstream's events into the canonical stream of chat
chunks; ``ChunkWriter`` is what they share: the chunk's envelope (id, ``created``,
model), a one-choice delta, the finishing choice, the usage chunk (``"choices": []``)
and a tool call's first and later pieces. ``SseToChunks`` is the reading half the
SSE-fed ones share: each event's data parsed as one JSON object (anything else is a
malformed stream), an event past the size bound failing the stream after what came
before it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any

import orjson

from parley import upstream_json
from parley.dialects.openai_chat_reply import usage_fields
from parley.dialects.translator import Failure, sse_data
from parley.domain.usage import Usage
from parley.domain.wire import JSON
from parley.sse import SseParser


class ChunkWriter:
    """Chat chunks of one stream; ``id`` and ``model`` may be learned from its first event."""

    __slots__ = ("created", "id", "model")

    def __init__(self, model: str = "", created: int | None = None) -> None:
        self.id = ""
        self.model = model
        self.created = created if created is not None else int(time.time())

    def chunk(self, choices: list[JSON], usage: JSON | None = None) -> JSON:
        chunk: JSON = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None:
            chunk["usage"] = usage
        return chunk

    def delta(self, delta: JSON) -> JSON:
        """A chunk whose one choice carries ``delta``."""
        return self.chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])

    def finish(self, finish_reason: str) -> JSON:
        """The chunk that ends the choice: an empty delta and its ``finish_reason``."""
        return self.chunk(
            [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason}]
        )

    def usage(self, usage: Usage) -> JSON:
        """The usage chunk (no choices), which a job passes on only to a caller that asked."""
        return self.chunk([], usage=usage_fields(usage))

    def call(self, position: int, call_id: str, name: str, arguments: str = "") -> JSON:
        """A tool call's first piece: its position in ``tool_calls``, id and name."""
        call = {
            "index": position,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        return self.delta({"tool_calls": [call]})

    def arguments(self, position: int, arguments: str) -> JSON:
        """A later piece of the tool call at ``position``: more of its ``arguments``."""
        return self.delta(
            {"tool_calls": [{"index": position, "function": {"arguments": arguments}}]}
        )


def as_int(value: Any) -> int:
    """An upstream's integer field, 0 when it is absent or not an integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class SseToChunks(ABC):
    """``Translator[JSON]``'s common part for an SSE stream of JSON events: a subclass
    reads each event (``_event``) into chunks written with ``_write``."""

    __slots__ = ("_parser", "_write", "done", "failure")

    def __init__(self, max_event_bytes: int, write: ChunkWriter) -> None:
        self._parser = SseParser(max_event_bytes)
        self._write = write
        self.done = False
        self.failure: Failure | None = None

    def feed(self, data: bytes) -> list[JSON]:
        if self.done or self.failure is not None:
            return []
        out: list[JSON] = []
        payloads, too_large = sse_data(self._parser, data)
        self._events(payloads, out)
        if too_large and self.failure is None and not self.done:
            self.failure = Failure(too_large=True)
        return out

    def _events(self, payloads: list[str], out: list[JSON]) -> None:
        for payload in payloads:
            if self.done or self.failure is not None:
                return
            try:
                event = upstream_json.loads(payload)
            except orjson.JSONDecodeError:
                event = None
            if not isinstance(event, dict):
                self.failure = Failure(malformed=True)
                return
            self._event(event, out)

    @abstractmethod
    def _event(self, event: JSON, out: list[JSON]) -> None:
        """One event's chunks; sets ``done`` or ``failure`` when it ends the stream."""
