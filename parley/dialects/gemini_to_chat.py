"""A Gemini ``streamGenerateContent?alt=sse`` stream's bytes → ``chat.completion.chunk``
objects, sans-IO.

Each SSE event is a whole ``GenerateContentResponse`` holding the next parts of the
first candidate. The first event gives the role chunk; a text part becomes ``content``,
a thought part (``"thought": true``) ``reasoning_content``, a ``functionCall`` part a
``tool_calls`` entry with its whole ``arguments`` (Gemini sends a call in one piece,
with the id ``gemini.call_id`` makes, as in a whole reply); a ``finishReason`` the
``finish_reason`` (``tool_calls`` after a call). Gemini has no closing event: the body's
end gives the usage chunk (``"choices": []``, from the last ``usageMetadata``; none if no
event carried one), which the chat job passes on only to a caller that asked for usage.
An event holding ``error`` is the stream's ``failure``.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from parley import upstream_json
from parley.dialects.canonical import Reasoning, Text, ToolCall
from parley.dialects.gemini import parts_of, read_part, read_usage, stop_of
from parley.dialects.openai_chat import STOP_TO_FINISH, usage_fields
from parley.dialects.translator import Failure
from parley.domain.usage import Usage
from parley.domain.wire import JSON
from parley.sse import EventTooLarge, SseParser


class GeminiToChat:
    """``Translator[JSON]``: Gemini's SSE events in, chat chunks out."""

    __slots__ = (
        "_calls",
        "_created",
        "_finished",
        "_id",
        "_model",
        "_parser",
        "_started",
        "_usage",
        "done",
        "failure",
    )

    def __init__(self, max_event_bytes: int, model: str = "", created: int | None = None) -> None:
        self._parser = SseParser(max_event_bytes)
        self._created = created if created is not None else int(time.time())
        self._id = ""
        self._model = model
        self._started = False
        self._finished = False
        self._calls = 0
        self._usage: Any = None
        """The last ``usageMetadata`` (each event's is the running total)."""
        self.done = False
        self.failure: Failure | None = None

    def feed(self, data: bytes) -> list[JSON]:
        if self.done or self.failure is not None:
            return []
        out: list[JSON] = []
        try:
            events = self._parser.feed(data)
        except EventTooLarge as error:
            self._events([event.data for event in error.events], out)
            if self.failure is None:
                self.failure = Failure(too_large=True)
            return out
        self._events([event.data for event in events], out)
        return out

    def end(self) -> list[JSON]:
        if self.done or self.failure is not None:
            return []
        self.done = True
        usage = self.delivered()
        if usage is None:
            return []  # no count reported: the job estimates, never bills a made-up zero
        return [self._chunk([], usage=usage_fields(usage))]

    def delivered(self) -> Usage | None:
        return read_usage(self._usage)

    def _events(self, payloads: list[str], out: list[JSON]) -> None:
        for payload in payloads:
            if self.failure is not None:
                return
            try:
                event = upstream_json.loads(payload)
            except orjson.JSONDecodeError:
                event = None
            if not isinstance(event, dict):
                self.failure = Failure(malformed=True)
                return
            if "error" in event:
                self.failure = Failure(payload=event)
                return
            self._event(event, out)

    def _event(self, event: JSON, out: list[JSON]) -> None:
        if not self._started:
            self._started = True
            self._id = str(event.get("responseId") or "")
            self._model = str(event.get("modelVersion") or self._model)
            out.append(self._delta({"role": "assistant", "content": ""}))
        if event.get("usageMetadata") is not None:
            self._usage = event["usageMetadata"]
        candidates = event.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else {}
        candidate = candidate if isinstance(candidate, dict) else {}
        for part in parts_of(candidate):
            block = read_part(part, self._id, self._calls)
            if isinstance(block, Text) and block.text:
                out.append(self._delta({"content": block.text}))
            elif isinstance(block, Reasoning) and block.text:
                out.append(self._delta({"reasoning_content": block.text}))
            elif isinstance(block, ToolCall):
                call = {
                    "index": self._calls,
                    "id": block.id,
                    "type": "function",
                    "function": {"name": block.name, "arguments": block.arguments},
                }
                self._calls += 1
                out.append(self._delta({"tool_calls": [call]}))
        stop = stop_of(event, candidate, bool(self._calls))
        if stop is not None and not self._finished:
            self._finished = True
            choice = {"index": 0, "delta": {}, "logprobs": None}
            out.append(self._chunk([{**choice, "finish_reason": STOP_TO_FINISH[stop]}]))

    def _delta(self, delta: JSON) -> JSON:
        return self._chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])

    def _chunk(self, choices: list[JSON], usage: JSON | None = None) -> JSON:
        chunk: JSON = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": choices,
        }
        if usage is not None:
            chunk["usage"] = usage
        return chunk
