"""An Anthropic Messages stream's bytes → ``chat.completion.chunk`` objects, sans-IO.

Event by event: ``message_start`` gives the role chunk (and the input usage);
``text_delta`` becomes ``content``, ``thinking_delta`` ``reasoning_content``, a
``tool_use`` block a ``tool_calls`` entry whose ``input_json_delta`` pieces are its
``arguments``; ``message_delta`` gives the ``finish_reason``; ``message_stop`` the usage
chunk (``"choices": []``, cached tokens in ``prompt_tokens_details``; none when a count
is not one), which the chat job passes on only to a caller that asked for usage. A body
that ends before ``message_stop`` is the stream's ``failure``. ``ping`` and ``signature_delta`` have
no chat form and go no further; an ``error`` event is the stream's ``failure``.
"""

from __future__ import annotations

from typing import Any

from parley.dialects.anthropic_messages_reply import STOP_REASONS, read_usage
from parley.dialects.chunks import ChunkWriter, SseToChunks, as_int
from parley.dialects.openai_chat_reply import STOP_TO_FINISH
from parley.dialects.translator import TRUNCATED, Failure
from parley.domain.usage import Usage
from parley.domain.wire import JSON


class MessagesToChat(SseToChunks):
    """``Translator[JSON]``: Messages events in, chat chunks out."""

    __slots__ = (
        "_counted",
        "_tools",
        "_usage",
    )

    def __init__(self, max_event_bytes: int, created: int | None = None) -> None:
        super().__init__(max_event_bytes, ChunkWriter(created=created))
        self._usage: JSON = {}
        """``message_start``'s usage, each count as sent, updated by ``message_delta``'s
        (cumulative); read only by ``read_usage``."""
        self._counted = False
        """``message_delta`` gave the output count (``message_start``'s is a placeholder)."""
        self._tools: dict[int, int] = {}
        """A ``tool_use`` block's index → its position in ``tool_calls``."""

    def end(self) -> list[JSON]:
        if not self.done and self.failure is None:
            self.failure = TRUNCATED  # no ``message_stop``: the stream was cut short
        return []

    def delivered(self) -> Usage | None:
        """The upstream's counts once ``message_delta`` gave the output; ``None`` before
        that, or when a count is not one (the caller's own count is billed, estimated)."""
        return read_usage(self._usage) if self._counted else None

    def _event(self, event: JSON, out: list[JSON]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._message_start(event.get("message"), out)
        elif kind == "content_block_start":
            self._block_start(event, out)
        elif kind == "content_block_delta":
            self._block_delta(event, out)
        elif kind == "message_delta":
            self._message_delta(event, out)
        elif kind == "message_stop":
            usage = self.delivered()
            if usage is not None:  # none valid: the job estimates, never a made-up count
                out.append(self._write.usage(usage))
            self.done = True
        elif kind == "error":
            self.failure = Failure(payload=event)

    def _message_start(self, message: Any, out: list[JSON]) -> None:
        message = message if isinstance(message, dict) else {}
        self._write.id = str(message.get("id") or "")
        self._write.model = str(message.get("model") or "")
        usage = message.get("usage")
        self._usage = dict(usage) if isinstance(usage, dict) else {}
        out.append(self._write.delta({"role": "assistant", "content": ""}))

    def _block_start(self, event: JSON, out: list[JSON]) -> None:
        block = event.get("content_block")
        if not isinstance(block, dict):
            return
        kind = block.get("type")
        if kind == "tool_use":
            position = len(self._tools)
            self._tools[as_int(event.get("index"))] = position
            call_id, name = str(block.get("id") or ""), str(block.get("name") or "")
            out.append(self._write.call(position, call_id, name))
        elif kind == "text" and block.get("text"):
            out.append(self._write.delta({"content": str(block["text"])}))

    def _block_delta(self, event: JSON, out: list[JSON]) -> None:
        delta = event.get("delta")
        if not isinstance(delta, dict):
            return
        kind = delta.get("type")
        if kind == "text_delta":
            out.append(self._write.delta({"content": str(delta.get("text", ""))}))
        elif kind == "thinking_delta":
            out.append(self._write.delta({"reasoning_content": str(delta.get("thinking", ""))}))
        elif kind == "input_json_delta":
            position = self._tools.get(as_int(event.get("index")), 0)
            out.append(self._write.arguments(position, str(delta.get("partial_json", ""))))

    def _message_delta(self, event: JSON, out: list[JSON]) -> None:
        usage = event.get("usage")
        if isinstance(usage, dict):
            self._counted = self._counted or "output_tokens" in usage
            self._usage.update((name, value) for name, value in usage.items() if value is not None)
        delta = event.get("delta")
        reason = delta.get("stop_reason") if isinstance(delta, dict) else None
        if isinstance(reason, str):
            finish = STOP_TO_FINISH[STOP_REASONS.get(reason, "end")]
            out.append(self._write.finish(finish))
