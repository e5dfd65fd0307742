"""A Bedrock ConverseStream body → ``chat.completion.chunk`` objects, sans-IO.

The body is AWS event-stream frames (``dialects/eventstream.py``), each an event named
by its ``:event-type`` header with a JSON payload: ``messageStart`` gives the role
chunk; a ``contentBlockDelta``'s ``text`` becomes ``content``, its
``reasoningContent.text`` ``reasoning_content``; a ``contentBlockStart`` with a
``toolUse`` opens a ``tool_calls`` entry whose ``toolUse.input`` pieces are its
``arguments``; ``messageStop`` gives the ``finish_reason``; ``metadata`` (the last
event) the usage chunk (``"choices": []``, cached tokens in ``prompt_tokens_details``),
which the chat job passes on only to a caller that asked for usage. A reasoning
signature, or a ``redactedContent``, is a ``thinking_blocks`` entry (``openai_chat_reply``).
With ``json_output`` (the call forced
``JSON_TOOL`` to carry JSON output) that tool's block opens no call: its ``input``
pieces are ``content``, and its ``tool_use`` stop is ``stop``. An ``exception`` frame
(``:exception-type``, a ``message`` payload) or an ``error`` frame (``:error-code``,
``:error-message``) is the stream's ``failure``, and so is broken framing, and a body
that ends before ``messageStop``.
"""

from __future__ import annotations

import orjson

from parley import upstream_json
from parley.dialects.bedrock_converse import JSON_TOOL, read_usage, stop_reason
from parley.dialects.chunks import ChunkWriter, as_int
from parley.dialects.eventstream import EventStreamDecoder, Frame
from parley.dialects.openai_chat_reply import STOP_TO_FINISH
from parley.dialects.translator import TRUNCATED, Failure
from parley.domain.usage import Usage
from parley.domain.wire import JSON


class ConverseToChat:
    """``Translator[JSON]``: ConverseStream frames in, chat chunks out."""

    __slots__ = (
        "_decoder",
        "_json_blocks",
        "_json_output",
        "_stopped",
        "_tools",
        "_usage",
        "_write",
        "done",
        "failure",
    )

    def __init__(
        self,
        max_event_bytes: int,
        model: str,
        created: int | None = None,
        *,
        json_output: bool = False,
    ) -> None:
        self._decoder = EventStreamDecoder(max_event_bytes)
        self._write = ChunkWriter(model, created)
        self._tools: dict[int, int] = {}
        """A ``toolUse`` block's ``contentBlockIndex`` → its position in ``tool_calls``."""
        self._json_output = json_output
        self._json_blocks: set[int] = set()
        """The ``contentBlockIndex`` of ``JSON_TOOL``'s blocks, whose input is content."""
        self._usage: Usage | None = None
        self._stopped = False
        """``messageStop`` came: the reply is whole, whether or not ``metadata`` follows."""
        self.done = False
        self.failure: Failure | None = None

    def feed(self, data: bytes) -> list[JSON]:
        out: list[JSON] = []
        if self._ended():
            return out
        decoder = self._decoder
        for frame in decoder.feed(data):
            self._frame(frame, out)
            if self._ended():
                return out
        if decoder.error is not None:
            self.failure = Failure(too_large=decoder.too_large, malformed=not decoder.too_large)
        return out

    def _ended(self) -> bool:
        return self.done or self.failure is not None

    def end(self) -> list[JSON]:
        if self._ended():
            return []
        if self._stopped:
            self.done = True  # ``messageStop`` came, its ``metadata`` did not: estimated
        else:
            self.failure = TRUNCATED  # no ``messageStop``: the stream was cut short
        return []

    def delivered(self) -> Usage | None:
        return self._usage

    def _frame(self, frame: Frame, out: list[JSON]) -> None:
        kind = frame.header(":message-type")
        if kind == "exception":
            name = frame.header(":exception-type") or "exception"
            self.failure = Failure(payload={"type": name, "message": _message(frame.payload)})
            return
        if kind == "error":
            name = frame.header(":error-code") or "error"
            message = frame.header(":error-message")
            self.failure = Failure(payload={"type": name, "message": message})
            return
        if kind != "event":
            return
        try:
            event = upstream_json.loads(frame.payload or b"{}")
        except orjson.JSONDecodeError:
            event = None
        if not isinstance(event, dict):
            self.failure = Failure(malformed=True)
            return
        self._event(frame.header(":event-type"), event, out)

    def _event(self, name: str | None, event: JSON, out: list[JSON]) -> None:
        if name == "messageStart":
            out.append(self._write.delta({"role": "assistant", "content": ""}))
        elif name == "contentBlockStart":
            start = event.get("start")
            use = start.get("toolUse") if isinstance(start, dict) else None
            if isinstance(use, dict):
                index = as_int(event.get("contentBlockIndex"))
                call_id, tool = str(use.get("toolUseId") or ""), str(use.get("name") or "")
                if self._json_output and tool == JSON_TOOL:
                    self._json_blocks.add(index)
                    return
                position = len(self._tools)
                self._tools[index] = position
                out.append(self._write.call(position, call_id, tool))
        elif name == "contentBlockDelta":
            self._block_delta(event, out)
        elif name == "messageStop":
            self._stopped = True
            reason = event.get("stopReason")
            stop = stop_reason(reason, self._json_output) if isinstance(reason, str) else "end"
            out.append(self._write.finish(STOP_TO_FINISH[stop]))
        elif name == "metadata":
            self._usage = read_usage(event.get("usage"))
            if self._usage is not None:
                out.append(self._write.usage(self._usage))
            self.done = True

    def _block_delta(self, event: JSON, out: list[JSON]) -> None:
        delta = event.get("delta")
        if not isinstance(delta, dict):
            return
        text = delta.get("text")
        if isinstance(text, str):
            out.append(self._write.delta({"content": text}))
            return
        use = delta.get("toolUse")
        if isinstance(use, dict):
            index = as_int(event.get("contentBlockIndex"))
            if index in self._json_blocks:
                out.append(self._write.delta({"content": str(use.get("input") or "")}))
                return
            position = self._tools.get(index, 0)
            out.append(self._write.arguments(position, str(use.get("input") or "")))
            return
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, dict):
            self._reasoning_delta(reasoning, out)

    def _reasoning_delta(self, reasoning: JSON, out: list[JSON]) -> None:
        """Thinking's text, then its signature (or redacted thinking whole)."""
        if isinstance(reasoning.get("text"), str):
            out.append(self._write.delta({"reasoning_content": reasoning["text"]}))
        signature, redacted = reasoning.get("signature"), reasoning.get("redactedContent")
        if isinstance(signature, str) and signature:
            signed = {"type": "thinking", "thinking": "", "signature": signature}
            out.append(self._write.delta({"thinking_blocks": [signed]}))
        elif isinstance(redacted, str) and redacted:
            hidden = {"type": "redacted_thinking", "data": redacted}
            out.append(self._write.delta({"thinking_blocks": [hidden]}))


def _message(payload: bytes) -> str | None:
    try:
        body = upstream_json.loads(payload or b"{}")
    except orjson.JSONDecodeError:
        return None
    if isinstance(body, dict):
        message = body.get("message", body.get("Message"))
        return message if isinstance(message, str) else None
    return None
