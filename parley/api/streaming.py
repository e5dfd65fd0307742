"""Rendering a streamed completion as Server-Sent Events: counting what each chunk
produced (``StreamTally``) and rewriting chunks into the caller's events (``ChunkShaper``).

Both run once per upstream read on the hottest path Parley has: keep them lean. The
stream itself is relayed and metered by the runner (``pipeline/runner.py``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import Any, cast

import orjson

from parley.dialects.openai_chat import read_usage, usage_fields
from parley.domain.usage import Usage
from parley.providers.shapes import Item, SameShape, Shape

DONE = b"data: [DONE]\n\n"
_MARK_LITERAL = orjson.dumps("\x00parley-shape-text\x00")
"""A text no chunk holds, as ``orjson`` writes it: marks where a shape's text goes."""


class StreamTally:
    """What a stream has produced so far, and the usage the upstream reported."""

    __slots__ = ("characters", "pieces", "prompt_estimate", "reported")

    def __init__(self, prompt_estimate: int) -> None:
        self.prompt_estimate = prompt_estimate
        self.characters = 0
        self.pieces = 0
        self.reported: Usage | None = None

    def observe(self, chunk: dict[str, Any]) -> None:
        """Count what the chunk produced (this runs once per token: keep it lean)."""
        if "usage" in chunk:
            self._report(chunk["usage"])
        # Nearly every chunk is one choice whose delta holds only its text: read it by
        # subscripts (a ``get`` is a method call, several times the cost here), any other
        # shape raising its way to ``_count``, which reads every choice by the rules.
        try:
            (choice,) = chunk["choices"]
            delta = choice["delta"]
            text = delta["content"]
        except (KeyError, TypeError, ValueError):
            self._count(chunk)
            return
        if type(text) is not str or len(delta) != 1:
            self._count(chunk)
        elif text:
            self.characters += len(text)
            self.pieces += 1

    def _count(self, chunk: dict[str, Any]) -> None:
        choices = chunk.get("choices")
        if choices and type(choices) is list:
            for choice in choices:
                produced = _choice_text(choice) if type(choice) is dict else 0
                if produced:
                    self.characters += produced
                    self.pieces += 1

    def _report(self, usage: Any) -> None:
        if usage:  # streams that asked for usage carry ``"usage": null`` on every chunk
            self.reported = read_usage(usage, source="the upstream's stream") or self.reported

    def usage(self) -> Usage:
        if self.reported is not None:
            return self.reported
        completion = max(self.pieces, (self.characters + 3) // 4)
        return Usage(
            prompt_tokens=self.prompt_estimate, completion_tokens=completion, estimated=True
        )

    @property
    def produced(self) -> bool:
        return self.pieces > 0 or self.reported is not None


def _choice_text(choice: dict[str, Any]) -> int:
    """Characters a choice produced: content, reasoning and tool-call text."""
    delta = choice.get("delta")
    if type(delta) is not dict:
        text = choice.get("text")  # a classic completion's choice
        return len(text) if type(text) is str else 0
    content = delta.get("content")
    size = len(content) if type(content) is str else 0
    if "reasoning_content" in delta:
        reasoning = delta["reasoning_content"]
        if type(reasoning) is str:
            size += len(reasoning)
    if "tool_calls" in delta:
        calls = delta["tool_calls"]
        if calls and type(calls) is list:
            for call in calls:
                function = call.get("function") if type(call) is dict else None
                if type(function) is dict:
                    size += len(function.get("arguments") or "") + len(function.get("name") or "")
    return size


class ChunkShaper:
    """Rewrites upstream chunks into the events the caller is owed."""

    __slots__ = (
        "_head",
        "_id",
        "_include_usage",
        "_last",
        "_model",
        "_prefix",
        "_shape",
        "_tail",
        "_upstream_id",
    )

    def __init__(self, model: str, id_prefix: str, include_usage: bool) -> None:
        self._model = model
        self._prefix = id_prefix
        self._include_usage = include_usage
        self._upstream_id: object = None
        self._id = ""
        self._last: dict[str, Any] = {}
        self._shape: Shape | None = None
        """The shape ``_head`` and ``_tail`` are rendered for; dropped by any chunk that
        goes the dict way (it may change the id the next one gets)."""
        self._head = self._tail = b""

    def events(self, batch: Sequence[Item], tally: StreamTally) -> bytes:
        """The batch, counted by ``tally``, as SSE bytes (empty when nothing is owed)."""
        if batch and isinstance(batch[0], SameShape):
            return self._same(batch[0], tally)
        # A SameShape is always a batch of its own (the adapter's rule): checked once a
        # batch, not once a chunk, so a read of many chunks costs what it did.
        chunks = cast("Sequence[dict[str, Any]]", batch)
        self._shape = None  # a chunk the dict way may change the id the next one gets
        shaped: list[bytes] = []
        observe, dumps, model = tally.observe, orjson.dumps, self._model
        for chunk in chunks:
            observe(chunk)
            if "usage" in chunk and not self._include_usage:
                if not chunk.get("choices"):
                    continue
                del chunk["usage"]
            chunk["model"] = model
            upstream = chunk.get("id")
            if upstream != self._upstream_id or not self._id:
                self._upstream_id, self._id = upstream, self._caller_id(upstream)
            chunk["id"] = self._id
            shaped.append(dumps(chunk))
        if not shaped:
            return b""
        self._last = chunk
        events = shaped[0] if len(shaped) == 1 else b"\n\ndata: ".join(shaped)
        return b"".join((b"data: ", events, b"\n\n"))

    def _same(self, same: SameShape, tally: StreamTally) -> bytes:
        """A read relayed by its shape: counted as ``observe`` counts its chunk (one
        choice, a delta holding only its text), written as the caller's head, the
        upstream's literal and the caller's tail: what the dict way would write, byte for
        byte when the upstream escapes as ``orjson`` does."""
        shape = same.shape
        if shape is not self._shape and not self._learn(shape):
            return self.events([shape.chunk(same.literal)], tally)  # the dict way
        text = same.text
        if text:
            tally.characters += len(text)
            tally.pieces += 1
        return self._head + same.literal + self._tail

    def _learn(self, shape: Shape) -> bool:
        """Render ``shape``'s chunk the dict way (its id and model, for the stream's state
        now), with a marker for its text, and split the event there."""
        rendered = self.events([shape.chunk(_MARK_LITERAL)], StreamTally(0))
        if rendered.count(_MARK_LITERAL) != 1:
            return False
        self._head, _, self._tail = rendered.partition(_MARK_LITERAL)
        self._shape = shape
        return True

    def usage_event(self, usage: Usage, chunk_object: str) -> bytes:
        """The usage chunk the caller asked for, when the upstream sent none (llama.cpp):
        Parley's own count, in the stream's id, model and shape (no choices)."""
        chunk = {
            "id": self._id or self._caller_id(None),
            "object": self._last.get("object", chunk_object),
            "created": self._last.get("created", int(time.time())),
            "model": self._model,
            "choices": [],
            "usage": usage_fields(usage),
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def _caller_id(self, upstream: object) -> str:
        """The upstream's id with the caller's prefix; one made up when it sent none."""
        if isinstance(upstream, str) and upstream.startswith(self._prefix):
            return upstream
        if isinstance(upstream, str) and upstream:
            return self._prefix + upstream
        return self._id or self._prefix + secrets.token_hex(12)
