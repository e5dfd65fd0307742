"""A Gemini ``streamGenerateContent?alt=sse`` stream's bytes → ``chat.completion.chunk``
objects, sans-IO.

Each SSE event is a whole ``GenerateContentResponse`` holding the next parts of the
first candidate. The first event gives the role chunk; a text part becomes ``content``,
a thought part (``"thought": true``) ``reasoning_content``, a ``functionCall`` part a
``tool_calls`` entry with its whole ``arguments`` (Gemini sends a call in one piece,
with the id ``gemini.call_id`` makes, as in a whole reply); a ``finishReason`` the
``finish_reason`` (``tool_calls`` after a call). Gemini has no closing event: the body's
end after a ``finishReason`` gives the usage chunk (``"choices": []``, from the last
``usageMetadata``; none if no event carried one), which the chat job passes on only to a
caller that asked for usage.
An event holding ``error`` is the stream's ``failure``, and so is a body that ends
before any ``finishReason``.
"""

from __future__ import annotations

from typing import Any

from parley.dialects.canonical import Reasoning, Text, ToolCall
from parley.dialects.chunks import ChunkWriter, SseToChunks
from parley.dialects.gemini import parts_of, read_part, read_usage, stop_of
from parley.dialects.openai_chat_reply import STOP_TO_FINISH
from parley.dialects.translator import TRUNCATED, Failure
from parley.domain.usage import Usage
from parley.domain.wire import JSON


class GeminiToChat(SseToChunks):
    """``Translator[JSON]``: Gemini's SSE events in, chat chunks out."""

    __slots__ = (
        "_calls",
        "_finished",
        "_started",
        "_usage",
    )

    def __init__(self, max_event_bytes: int, model: str = "", created: int | None = None) -> None:
        super().__init__(max_event_bytes, ChunkWriter(model, created))
        self._started = False
        self._finished = False
        self._calls = 0
        self._usage: Any = None
        """The last ``usageMetadata`` (each event's is the running total)."""

    def end(self) -> list[JSON]:
        if self.done or self.failure is not None:
            return []
        if not self._finished:
            self.failure = TRUNCATED  # no ``finishReason``: the stream was cut short
            return []
        self.done = True
        usage = self.delivered()
        if usage is None:
            return []  # no count reported: the job estimates, never bills a made-up zero
        return [self._write.usage(usage)]

    def delivered(self) -> Usage | None:
        return read_usage(self._usage)

    def _event(self, event: JSON, out: list[JSON]) -> None:
        if "error" in event:
            self.failure = Failure(payload=event)
            return
        if not self._started:
            self._started = True
            self._write.id = str(event.get("responseId") or "")
            self._write.model = str(event.get("modelVersion") or self._write.model)
            out.append(self._write.delta({"role": "assistant", "content": ""}))
        if event.get("usageMetadata") is not None:
            self._usage = event["usageMetadata"]
        candidates = event.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else {}
        candidate = candidate if isinstance(candidate, dict) else {}
        for part in parts_of(candidate):
            block = read_part(part, self._write.id, self._calls)
            if isinstance(block, Text) and block.text:
                out.append(self._write.delta({"content": block.text}))
            elif isinstance(block, Reasoning) and block.text:
                out.append(self._write.delta({"reasoning_content": block.text}))
            elif isinstance(block, ToolCall):
                out.append(self._write.call(self._calls, block.id, block.name, block.arguments))
                self._calls += 1
        stop = stop_of(event, candidate, bool(self._calls))
        if stop is not None and not self._finished:
            self._finished = True
            out.append(self._write.finish(STOP_TO_FINISH[stop]))
