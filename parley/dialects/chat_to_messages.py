"""An OpenAI chat stream's bytes → Anthropic Messages events, sans-IO.

Fed the ``data:`` events of ``chat.completion.chunk`` objects, it writes what Anthropic's
API sends: ``message_start`` and a ``ping``, then each content block in turn
(``content_block_start``, its ``text_delta``, ``thinking_delta`` or ``input_json_delta``
events, ``content_block_stop``), and at the end ``message_delta`` (the stop reason and
the usage) and ``message_stop``. A delta of another kind than the open block closes it
and opens the next; each tool call is a ``tool_use`` block of its own. A delta's
``thinking_blocks`` (``openai_chat_reply``) give the thinking's ``signature_delta``
(its text came as ``reasoning_content``) or a ``redacted_thinking`` block whole.

The usage comes last in an OpenAI stream (the chunk with ``"choices": []``), so
``message_delta`` waits for ``[DONE]`` or the body's end; ``message_start`` carries the
prompt's estimate, and ``message_delta`` the upstream's counts (cumulative, as
Anthropic's are).
"""

from __future__ import annotations

from typing import Any

import orjson

from parley.dialects.anthropic_messages_reply import STOP_TO_REASON, usage_fields
from parley.dialects.from_chat import FromChatChunks
from parley.domain.usage import Allowance, Usage
from parley.domain.wire import JSON

DELTA_END = b"}}\n\n"
"""What follows a text's literal in its ``content_block_delta`` event."""


def sse(name: str, payload: JSON) -> bytes:
    """One Anthropic event: its name and its JSON data."""
    return b"".join((b"event: ", name.encode(), b"\ndata: ", orjson.dumps(payload), b"\n\n"))


PING = sse("ping", {"type": "ping"})
MESSAGE_STOP = sse("message_stop", {"type": "message_stop"})
"""Events that never change, rendered once."""


class ChatToMessages(FromChatChunks):
    """``Translator[bytes]``: a chat stream in, Messages events out."""

    __slots__ = ("_block", "_head", "_id", "_index", "_model", "_tools")

    def __init__(
        self,
        model: str,
        message_id: str,
        prompt_estimate: int,
        allowance: Allowance,
        max_event_bytes: int,
    ) -> None:
        super().__init__(prompt_estimate, allowance, max_event_bytes)
        self._model = model
        self._id = message_id
        self._index = -1
        """The open content block's index (-1: none yet)."""
        self._block: str | None = None
        """The open block's kind: ``text``, ``thinking`` or ``tool_use``; ``None`` if closed."""
        self._tools: dict[int, int] = {}
        """An OpenAI tool call's index → its ``tool_use`` block's index."""
        self._head: bytes | None = None
        """The open text or thinking block's delta event up to its text, rendered once."""

    def _start(self, out: list[bytes]) -> None:
        self._started = True
        message: JSON = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_fields(Usage(prompt_tokens=self._prompt_estimate)),
        }
        out.append(sse("message_start", {"type": "message_start", "message": message}))
        out.append(PING)

    def _delta(self, delta: JSON, out: list[bytes]) -> None:
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._text("reasoning_content", orjson.dumps(reasoning), reasoning, out)
        signed = delta.get("thinking_blocks")
        if isinstance(signed, list):
            for block in signed:
                if isinstance(block, dict):
                    self._signed(block, out)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text("content", orjson.dumps(content), content, out)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    self._tool_call(call, out)

    def _text(self, field: str, literal: bytes, text: str, out: list[bytes]) -> None:
        """A ``text_delta`` (``content``) or ``thinking_delta`` (reasoning) of the open
        block of its kind (opened first if another is open): the block's event rendered
        once up to the text, then the literal as it came."""
        if field == "content":
            if self._block != "text":
                self._open("text", {"type": "text", "text": ""}, out)
        elif self._block != "thinking":
            self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""}, out)
        head = self._head
        if head is None:
            kind = b'"text_delta","text":' if field == "content" else None
            delta = kind or b'"thinking_delta","thinking":'
            head = self._head = (
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
                + str(self._index).encode() + b',"delta":{"type":' + delta
            )  # fmt: skip
            self._run = (field, head, DELTA_END)  # until the block closes
        out.append(head + literal + DELTA_END)
        self._characters += len(text)
        self._pieces += 1

    def _signed(self, block: JSON, out: list[bytes]) -> None:
        """A ``thinking_blocks`` entry: the open thinking's signature, or redacted
        thinking as a block of its own."""
        kind, signature, data = block.get("type"), block.get("signature"), block.get("data")
        if kind == "thinking" and isinstance(signature, str) and signature:
            self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""}, out)
            delta = {"type": "signature_delta", "signature": signature}
            event = {"type": "content_block_delta", "index": self._index, "delta": delta}
            out.append(sse("content_block_delta", event))
        elif kind == "redacted_thinking" and isinstance(data, str):
            hidden = {"type": "redacted_thinking", "data": data}
            self._open("redacted_thinking", hidden, out, force=True)
            self._close(out)

    def _tool_call(self, call: JSON, out: list[bytes]) -> None:
        position = call.get("index", 0)
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        if position not in self._tools:
            name = str(function.get("name") or "")
            block = {"type": "tool_use", "id": str(call.get("id") or ""), "name": name}
            self._open("tool_use", {**block, "input": {}}, out, force=True)
            self._tools[position] = self._index
            self._characters += len(name)
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            index = self._tools[position]
            delta = {"type": "input_json_delta", "partial_json": arguments}
            self._emit(delta, len(arguments), out, index)

    def _open(self, kind: str, block: JSON, out: list[bytes], *, force: bool = False) -> None:
        """Open a block of ``kind`` unless one is open (``force``: always a new one)."""
        if self._block == kind and not force:
            return
        self._close(out)
        self._index += 1
        self._block = kind
        start = {"type": "content_block_start", "index": self._index, "content_block": block}
        out.append(sse("content_block_start", start))

    def _emit(self, delta: JSON, size: int, out: list[bytes], index: int | None = None) -> None:
        at = self._index if index is None else index
        event = {"type": "content_block_delta", "index": at, "delta": delta}
        out.append(sse("content_block_delta", event))
        self._characters += size
        self._pieces += 1

    def _close(self, out: list[bytes]) -> None:
        """Close the open block, if any: its text's bytes go with it."""
        self._head = self._run = None
        if self._block is not None:
            out.append(
                sse("content_block_stop", {"type": "content_block_stop", "index": self._index})
            )
            self._block = None

    def _finish(self, out: list[bytes]) -> None:
        """The end: the open block closed, then ``message_delta`` and ``message_stop``."""
        if not self._started:
            self._start(out)
        self._close(out)
        usage = self.billed()
        delta: dict[str, Any] = {
            "stop_reason": STOP_TO_REASON[self._stop] if self._stop else "end_turn",
            "stop_sequence": None,
        }
        out.append(
            sse(
                "message_delta",
                {"type": "message_delta", "delta": delta, "usage": usage_fields(usage)},
            )
        )
        out.append(MESSAGE_STOP)
        self.done = True
