"""What the fake OpenAI-compatible engine answers a chat or completion request with.

The reply is ``"echo: " + <last user message>`` (for completions, the prompt), split into
words (``words`` instead: that many words of ``SENTENCE``); ``max_tokens`` (or
``max_completion_tokens``) keeps only that many words and makes ``finish_reason``
``"length"`` (else ``"stop"``). Usage: ``prompt_tokens`` = whitespace-separated words in
every message (or the prompt), ``completion_tokens`` = words produced. A chat stream sends
a role chunk, one chunk per word, a chunk with the ``finish_reason``; a completion stream
one chunk per word and a finish chunk; then, only if ``stream_options.include_usage`` is
true, a chunk with ``"choices": []`` and the ``usage``. ``created`` is ``CREATED``.

With ``tools`` asked for (the engine's ``tools`` knob), a chat request that offers tools
and whose last message is not a tool result is answered with a call of the first tool,
``{"query": <the echo>}`` (``finish_reason: tool_calls``; streamed as the call's name,
then its arguments in two pieces).

A chat request asking for JSON (``response_format`` ``json_object`` or ``json_schema``)
is answered with its last user message as it is, without ``echo:`` (a model that writes
the JSON it was shown).

With ``reasoning`` (the engine's knob), a chat reply first thinks ``THOUGHT`` as
``reasoning_content`` (a whole reply's message field; streamed, one delta per piece
before the text), counted in ``completion_tokens`` and told as
``completion_tokens_details.reasoning_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from tests.upstreams.server import JSON

CREATED = 1_700_000_000
SENTENCE = ("the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog")
Kind = Literal["chat", "completion", "embedding"]
THOUGHT = ("Let", " me", " think", " it", " over.")


@dataclass(frozen=True, slots=True)
class Script:
    """What one request gets: the reply's word pieces, why it ends, what it counted."""

    kind: Kind
    reply_id: str
    model: str
    pieces: list[str]
    finish_reason: str
    prompt_tokens: int
    reported: JSON | None = None
    """The usage the engine reports instead of its count (``{}``: none at all)."""
    tool_call: JSON | None = None
    cached_tokens: int = 0
    """Of the prompt's tokens, those reported read from a prompt cache (never more than
    the prompt's)."""
    thought: tuple[str, ...] = ()

    @property
    def usage(self) -> JSON:
        if self.reported is not None:
            return self.reported
        produced = len(self.pieces) + len(self.thought)
        total = self.prompt_tokens + produced
        usage: JSON = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": produced,
            "total_tokens": total,
        }
        if self.cached_tokens:
            cached = min(self.cached_tokens, self.prompt_tokens)
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if self.thought:
            usage["completion_tokens_details"] = {"reasoning_tokens": len(self.thought)}
        return usage


def script_for(
    kind: Kind,
    body: JSON,
    words: int | None,
    reply_id: str,
    *,
    reported: JSON | None = None,
    overlong: bool = False,
    tools: bool = False,
    reasoning: bool = False,
) -> Script:
    texts, last = _chat_texts(body) if kind == "chat" else _prompt_texts(body)
    if words is not None:
        reply = [SENTENCE[i % len(SENTENCE)] for i in range(words)]
    elif _wants_json(body) and kind == "chat":
        reply = last.split(" ")
    else:
        reply = f"echo: {last}".split()
    limit = body.get("max_tokens", body.get("max_completion_tokens"))
    finish = "stop"
    if isinstance(limit, int) and limit < len(reply) and not overlong:
        reply, finish = reply[: max(limit, 0)], "length"
    pieces = [word if i == 0 else f" {word}" for i, word in enumerate(reply)]
    prompt_tokens = sum(len(text.split()) for text in texts)
    call = _tool_call(body, "".join(pieces), reply_id) if tools and kind == "chat" else None
    if call is not None:
        finish = "tool_calls"
    model = str(body.get("model"))
    thought = THOUGHT if reasoning and kind == "chat" else ()
    return Script(
        kind,
        reply_id,
        model,
        pieces,
        finish,
        prompt_tokens,
        reported=reported,
        tool_call=call,
        thought=thought,
    )


def _wants_json(body: JSON) -> bool:
    form = body.get("response_format")
    return isinstance(form, dict) and form.get("type") in ("json_object", "json_schema")


def _tool_call(body: JSON, echo: str, reply_id: str) -> JSON | None:
    offered = body.get("tools")
    messages = body.get("messages") or [{}]
    if not offered or messages[-1].get("role") == "tool":
        return None
    name = offered[0]["function"]["name"]
    arguments = orjson.dumps({"query": echo}).decode()
    function = {"name": name, "arguments": arguments}
    return {"id": f"call_{reply_id}", "type": "function", "function": function}


def _chat_texts(body: JSON) -> tuple[list[str], str]:
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    texts = [_content_text(m.get("content")) for m in messages]
    users = [_content_text(m.get("content")) for m in messages if m.get("role") == "user"]
    return texts, users[-1] if users else ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _prompt_texts(body: JSON) -> tuple[list[str], str]:
    prompt = body.get("prompt", "")
    items = prompt if isinstance(prompt, list) else [prompt]
    texts = [" ".join(map(str, i)) if isinstance(i, list) else str(i) for i in items]
    return texts, texts[0] if texts else ""


def whole_reply(script: Script) -> JSON:
    text = "".join(script.pieces)
    if script.kind == "chat":
        message: JSON = {"role": "assistant", "content": text, "refusal": None}
        if script.thought:
            message["reasoning_content"] = "".join(script.thought)
        if script.tool_call is not None:
            message["tool_calls"] = [script.tool_call]
        choice: JSON = {"index": 0, "message": message, "logprobs": None}
        head = _head(script, "chat.completion")
        extra = {"system_fingerprint": "fp_fake"}
    else:
        choice = {"text": text, "index": 0, "logprobs": None}
        head, extra = _head(script, "text_completion"), {}
    choice["finish_reason"] = script.finish_reason
    usage = {"usage": script.usage} if script.usage else {}
    return {**head, "choices": [choice], **usage, **extra}


def chunks_for(script: Script, with_usage: bool) -> list[Any]:
    kind = "chat.completion.chunk" if script.kind == "chat" else "text_completion"
    head = _head(script, kind) | ({"usage": None} if with_usage else {})
    if script.kind == "chat":
        deltas: list[JSON] = [
            {"role": "assistant", "content": ""},
            *({"reasoning_content": p} for p in script.thought),
            *({"content": p} for p in script.pieces),
            *_tool_deltas(script.tool_call),
            {},
        ]
        choices: list[JSON] = [
            {"index": 0, "delta": d, "logprobs": None, "finish_reason": None} for d in deltas
        ]
    else:
        texts = [*script.pieces, ""]
        choices = [{"text": t, "index": 0, "logprobs": None, "finish_reason": None} for t in texts]
    choices[-1]["finish_reason"] = script.finish_reason
    chunks: list[Any] = [{**head, "choices": [choice]} for choice in choices]
    if with_usage:
        chunks.append({**head, "choices": [], "usage": script.usage})
    return chunks


def _tool_deltas(call: JSON | None) -> list[JSON]:
    if call is None:
        return []
    arguments = call["function"]["arguments"]
    middle = len(arguments) // 2
    named = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
    return [
        {"tool_calls": [{"index": 0, **named}]},
        *({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}
          for part in (arguments[:middle], arguments[middle:])),
    ]  # fmt: skip


def _head(script: Script, kind: str) -> JSON:
    return {"id": script.reply_id, "object": kind, "created": CREATED, "model": script.model}
