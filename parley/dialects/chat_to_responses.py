"""Chat chunks → OpenAI Responses stream events, sans-IO.

Fed an OpenAI chat stream's bytes (``feed``) or chat chunks another provider's reader
made (``feed_chunks``), it writes what the Responses API sends, each event with the
next ``sequence_number``: ``response.created`` and ``response.in_progress``; for each
output item ``response.output_item.added``, then

- a reasoning item (``reasoning_content`` deltas), told both as its summary (what
  OpenAI's reasoning models stream, and all some clients read) and as ``reasoning_text``
  content: ``response.reasoning_summary_part.added`` and ``response.content_part.added``
  of a ``reasoning_text`` part; for each delta ``response.reasoning_summary_text.delta``
  and ``response.reasoning_text.delta``; then ``response.reasoning_summary_text.done``,
  ``response.reasoning_summary_part.done``, ``response.reasoning_text.done`` and
  ``response.content_part.done``;
- a message (``content`` deltas): ``response.content_part.added`` of an ``output_text``
  part, ``response.output_text.delta``... and ``.done``, ``response.content_part.done``;
- a function call (each ``tool_calls`` index): ``response.function_call_arguments.delta``
  ... and ``.done``;

then ``response.output_item.done``; and at the end ``response.completed`` (or
``response.incomplete`` when the output limit cut the reply) with the whole response
and its usage. A delta of another kind closes the open item (function calls stay open
together until something else comes, since a chat stream may interleave them).

``failed`` writes how a stream that began and then failed ends: an ``error`` event and
``response.failed``. ``response`` is the final object, for storing.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from parley.dialects.from_chat import FromChatChunks
from parley.dialects.responses_objects import (
    call_item,
    finished,
    message_item,
    new_id,
    response_error,
    summary_part,
    text_part,
    usage_fields,
)
from parley.domain.usage import Allowance
from parley.domain.wire import JSON

_DONE = "[DONE]"
_CLOSE = b"}\n\n"
"""What ends a delta event, after its number."""
REASONING_PART: JSON = {"type": "reasoning_text", "text": ""}


def sse(payload: JSON) -> bytes:
    """One Responses event: its type as the SSE event name, and its JSON data."""
    name: str = payload["type"]
    return b"".join((b"event: ", name.encode(), b"\ndata: ", orjson.dumps(payload), b"\n\n"))


class _Item:
    """One output item being streamed: its place, its JSON and the text so far."""

    __slots__ = ("deltas", "index", "item", "kind", "text")

    def __init__(self, index: int, kind: str, item: JSON) -> None:
        self.index = index
        self.kind = kind
        self.item = item
        self.text: list[str] = []
        at = f'"item_id":{orjson.dumps(item["id"]).decode()},"output_index":{index}'
        self.deltas: tuple[tuple[bytes, bytes], ...]
        """Each delta event a piece of text makes, as its bytes before the text and after
        (then its number): a message's text, or a reasoning's summary and its content."""
        if kind == "message":
            self.deltas = (_delta("output_text", at + ',"content_index":0', b',"logprobs":[]'),)
        else:
            self.deltas = (
                _delta("reasoning_summary_text", at + ',"summary_index":0', b""),
                _delta("reasoning_text", at + ',"content_index":0', b""),
            )


def _delta(name: str, at: str, after: bytes) -> tuple[bytes, bytes]:
    head = (
        f'event: response.{name}.delta\ndata: {{"type":"response.{name}.delta",{at},"delta":'
    ).encode()
    return head, after + b',"sequence_number":'


class ChatToResponses(FromChatChunks):
    """``ChunkTranslator[bytes]``: chat chunks in, Responses events out."""

    __slots__ = (
        "_calls",
        "_ids",
        "_open",
        "_output",
        "_sequence",
        "response",
    )

    def __init__(
        self,
        response: JSON,
        prompt_estimate: int,
        allowance: Allowance,
        max_event_bytes: int,
        ids: Callable[[str], str] = new_id,
    ) -> None:
        super().__init__(prompt_estimate, allowance, max_event_bytes)
        self.response = response
        """The ``response`` object (``responses_objects.skeleton``), whole once ``done``."""
        self._ids = ids
        """Makes each output item's id from its prefix (``new_id``)."""
        self._sequence = 0
        self._output: list[_Item] = []
        self._open: _Item | None = None
        """The open reasoning or message item."""
        self._calls: dict[int, _Item] = {}
        """A chat tool call's index → its open function call item."""

    def failed(self, code: str | None, message: str) -> bytes:
        """How a started stream ends on a failure: ``error``, then ``response.failed``
        with what was produced so far (``response.created`` first if it was not sent)."""
        out: list[bytes] = []
        if not self._started:
            self._start(out)
        self._event(out, {"type": "error", "code": code, "message": message, "param": None})
        response = self.response
        response["status"] = "failed"
        response["error"] = response_error(code, message)
        response["output"] = [item.item for item in self._output]
        usage = self.delivered()
        response["usage"] = usage_fields(self._allowance.cap(usage)) if usage is not None else None
        self._event(out, {"type": "response.failed", "response": response})
        self.done = True
        return b"".join(out)

    def _event(self, out: list[bytes], payload: JSON) -> None:
        payload["sequence_number"] = self._sequence
        self._sequence += 1
        out.append(sse(payload))

    def _start(self, out: list[bytes]) -> None:
        """``response.created`` and ``response.in_progress``: one response, written once."""
        self._started = True
        written = orjson.dumps(self.response)
        for kind in (b"response.created", b"response.in_progress"):
            number = str(self._sequence).encode()
            self._sequence += 1
            out.append(
                b"event: " + kind + b'\ndata: {"type":"' + kind + b'","response":' + written
                + b',"sequence_number":' + number + b"}\n\n"
            )  # fmt: skip

    def _delta(self, delta: JSON, out: list[bytes]) -> None:
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._text("reasoning_content", orjson.dumps(reasoning), reasoning, out)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text("content", orjson.dumps(content), content, out)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    self._tool_call(call, out)

    def _text(self, field: str, literal: bytes, text: str, out: list[bytes]) -> None:
        kind = "message" if field == "content" else "reasoning"
        item = self._open
        if item is None or item.kind != kind:
            item = self._open_text(kind, out)
        item.text.append(text)
        # The item's delta events differ only in their text and number: written around
        # them from the bytes ``_Item`` rendered once (what orjson writes for the dict),
        # as pieces the read's bytes are joined from once (a concatenation copies).
        for head, tail in item.deltas:
            out += (head, literal, tail, str(self._sequence).encode(), _CLOSE)
            self._sequence += 1
        self._characters += len(text)
        self._pieces += 1

    def _open_text(self, kind: str, out: list[bytes]) -> _Item:
        self._close_all(out)
        if kind == "message":
            written = message_item(self._ids("msg_"), "", "in_progress")
            part = text_part("")
        else:
            written = {"id": self._ids("rs_"), "type": "reasoning", "summary": [], "content": []}
            part = dict(REASONING_PART)
        item = _Item(len(self._output), kind, written)
        self._output.append(item)
        self._open = item
        added = {"type": "response.output_item.added", "output_index": item.index}
        self._event(out, {**added, "item": dict(item.item)})
        at = {"item_id": item.item["id"], "output_index": item.index}
        if kind != "message":
            summary = {"type": "response.reasoning_summary_part.added", **at, "summary_index": 0}
            self._event(out, {**summary, "part": summary_part("")})
        added_part = {"type": "response.content_part.added", **at, "content_index": 0}
        self._event(out, {**added_part, "part": part})
        return item

    def _tool_call(self, call: JSON, out: list[bytes]) -> None:
        position = call.get("index", 0)
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        item = self._calls.get(position) if isinstance(position, int) else None
        if item is None:
            if self._open is not None:
                self._close(self._open, out)
                self._open = None
            name = str(function.get("name") or "")
            call_id = str(call.get("id") or self._ids("call_"))
            written = call_item(self._ids("fc_"), call_id, name, "", "in_progress")
            item = _Item(len(self._output), "function_call", written)
            self._output.append(item)
            self._calls[position if isinstance(position, int) else len(self._calls)] = item
            self._event(
                out,
                {
                    "type": "response.output_item.added",
                    "output_index": item.index,
                    "item": dict(written),
                },
            )
            self._characters += len(name)
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            item.text.append(arguments)
            self._event(
                out,
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item.item["id"],
                    "output_index": item.index,
                    "delta": arguments,
                },
            )
            self._characters += len(arguments)
            self._pieces += 1

    def _close_all(self, out: list[bytes]) -> None:
        if self._open is not None:
            self._close(self._open, out)
            self._open = None
        for item in self._calls.values():
            self._close(item, out)
        self._calls.clear()

    def _close(self, item: _Item, out: list[bytes]) -> None:
        text = "".join(item.text)
        at = {"item_id": item.item["id"], "output_index": item.index}
        if item.kind == "function_call":
            item.item["arguments"] = text or "{}"
            done = {"type": "response.function_call_arguments.done", **at}
            self._event(
                out, {**done, "name": item.item["name"], "arguments": item.item["arguments"]}
            )
        else:
            if item.kind == "message":
                part = text_part(text)
                self._event(
                    out,
                    {
                        "type": "response.output_text.done",
                        **at,
                        "content_index": 0,
                        "text": text,
                        "logprobs": [],
                    },
                )
            else:
                summary = {**at, "summary_index": 0}
                self._event(
                    out, {"type": "response.reasoning_summary_text.done", **summary, "text": text}
                )
                written = summary_part(text)
                self._event(
                    out,
                    {"type": "response.reasoning_summary_part.done", **summary, "part": written},
                )
                item.item["summary"] = [written]
                part = {"type": "reasoning_text", "text": text}
                done = {"type": "response.reasoning_text.done", **at, "content_index": 0}
                self._event(out, {**done, "text": text})
            part_done = {"type": "response.content_part.done", **at, "content_index": 0}
            self._event(out, {**part_done, "part": part})
            item.item["content"] = [part]
        if item.kind != "reasoning":
            item.item["status"] = "completed"
        self._event(
            out,
            {"type": "response.output_item.done", "output_index": item.index, "item": item.item},
        )

    def _finish(self, out: list[bytes]) -> None:
        """The end: open items closed, then ``response.completed`` (or ``.incomplete``)."""
        if not self._started:
            self._start(out)
        self._close_all(out)
        usage = self.billed()
        response = self.response
        finished(response, [item.item for item in self._output], self._stop, usage)
        kind = "response.completed" if response["status"] == "completed" else "response.incomplete"
        self._event(out, {"type": kind, "response": response})
        self.done = True
