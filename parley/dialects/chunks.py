"""The ``chat.completion.chunk`` objects a provider's stream reader writes, built one way.

Every reader of a non-OpenAI stream (``MessagesToChat``, ``GeminiToChat``,
``ConverseToChat``) turns its upstream's events into the canonical stream of chat
chunks; ``ChunkWriter`` is what they share: the chunk's envelope (id, ``created``,
model), a one-choice delta, the finishing choice, the usage chunk (``"choices": []``)
and a tool call's first and later pieces.
"""

from __future__ import annotations

import time
from typing import Any

from parley.dialects.openai_chat import usage_fields
from parley.domain.usage import Usage
from parley.domain.wire import JSON


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
