"""``StreamTally``: what an OpenAI-shaped chat or completions stream produced, and the
usage its upstream reported.

Every stream Parley relays is billed from it: the upstream's own usage chunk when one
came (``read_usage``), else Parley's estimate from the characters and pieces the stream
produced. The relay (``openai_relay``) feeds it each chunk it passes on, whichever way the chunk
went; it stands apart because it is the stream's bill, not its translation.
"""

from __future__ import annotations

from typing import Any

from parley.dialects.openai_chat_reply import read_usage
from parley.domain.usage import Usage, with_estimate


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
            usage = chunk["usage"]
            self._report(usage)
            if usage and not chunk.get("choices"):
                return  # the usage chunk: nothing produced (and no exception to raise below)
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
        """The upstream's report with Parley's estimate (``with_estimate``), or the
        estimate when it reported nothing valid."""
        completion = max(self.pieces, (self.characters + 3) // 4)
        estimate = Usage(
            prompt_tokens=self.prompt_estimate, completion_tokens=completion, estimated=True
        )
        return with_estimate(self.reported, estimate)

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
