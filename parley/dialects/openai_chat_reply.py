"""OpenAI chat completions' replies as a dialect: ``chat.completion`` objects and usage.

``decode_reply`` reads an upstream's ``chat.completion`` into the canonical ``Reply``, and
``encode_reply`` writes one for an OpenAI caller; ``read_usage`` and ``usage_fields`` do
the same for usage, cached tokens included (``prompt_tokens`` counts them,
``prompt_tokens_details`` tells them). The finish reasons map both ways. It stands apart
from the request half (``openai_chat``) because every stream reader and relay needs these
names and nothing of the request's: a chat stream's chunks end with a finish reason and
carry usage in this shape.

Signed reasoning: chat has no field for the signature (or the encrypted, redacted
thinking) that lets Claude's thinking go back to it, so Parley carries it as
``thinking_blocks`` (LiteLLM's spelling, Anthropic's block shapes: ``{"type":
"thinking", "thinking", "signature"}`` and ``{"type": "redacted_thinking", "data"}``)
beside ``reasoning_content``, on a reply's message and a stream's delta
(``thinking_blocks_of``) and read back from an assistant message in history
(``read_thinking_blocks``).
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from parley.dialects.canonical import Block, Reasoning, Reply, Stop, Text, ToolCall
from parley.domain.usage import Usage, reported_counts
from parley.domain.wire import JSON

FINISH_TO_STOP: dict[str, Stop] = {
    "stop": "end",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
REQUIRED = ("prompt_tokens", "completion_tokens")
"""The counts an OpenAI usage object must hold; its details may be absent."""
STOP_TO_FINISH: dict[Stop, str] = {
    "end": "stop",
    "stop_sequence": "stop",
    "pause": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}


def decode_reply(reply: JSON) -> Reply:
    """A ``chat.completion`` object as the canonical reply (its first choice)."""
    choices = reply.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else {}
    message = choice.get("message") if isinstance(choice, dict) else None
    message = message if isinstance(message, dict) else {}
    blocks: list[Block] = list(read_thinking_blocks(message.get("thinking_blocks")))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if not blocks and isinstance(reasoning, str) and reasoning:
        blocks.append(Reasoning(reasoning))
    content = message.get("content")
    if isinstance(content, str) and content:
        blocks.append(Text(content))
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            name, arguments = function.get("name"), function.get("arguments")
            blocks.append(ToolCall(str(call.get("id") or ""), str(name), str(arguments or "{}")))
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    return Reply(
        id=str(reply.get("id") or ""),
        model=str(reply.get("model") or ""),
        blocks=tuple(blocks),
        stop=FINISH_TO_STOP.get(finish) if isinstance(finish, str) else None,
        usage=read_usage(reply.get("usage")),
    )


def read_usage(usage: Any, *, source: str = "the upstream") -> Usage | None:
    """An OpenAI ``usage`` object as ``Usage``, cached and reasoning tokens included;
    ``None`` when it holds no prompt and completion counts, or any number that is not a
    count (``reported_counts`` refuses and logs it). Cached tokens are never more than the
    prompt, nor reasoning more than the output."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    output = usage.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    output = output if isinstance(output, dict) else {}
    counts = reported_counts(
        {
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "cached_tokens": details.get("cached_tokens"),
            "cache_write_tokens": details.get("cache_write_tokens"),
            "reasoning_tokens": output.get("reasoning_tokens"),
        },
        source=source,
        required=REQUIRED,
    )
    if counts is None:
        return None
    prompt, completion = counts["prompt_tokens"], counts["completion_tokens"]
    cached = min(counts["cached_tokens"], prompt)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        cache_write_tokens=min(counts["cache_write_tokens"], prompt - cached),
        reasoning_tokens=min(counts["reasoning_tokens"], completion),
    )


def usage_fields(usage: Usage) -> JSON:
    """``usage`` in OpenAI's shape: cached tokens counted in ``prompt_tokens`` and told
    in ``prompt_tokens_details`` (``cache_write_tokens`` for what was written)."""
    fields: JSON = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cached_tokens or usage.cache_write_tokens:
        fields["prompt_tokens_details"] = {
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        }
    if usage.reasoning_tokens:
        fields["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return fields


def encode_reply(reply: Reply, created: int | None = None) -> JSON:
    """The canonical reply as a ``chat.completion`` object (the job sets id and model)."""
    message: JSON = {"role": "assistant", "content": None}
    texts = [block.text for block in reply.blocks if isinstance(block, Text)]
    if texts:
        message["content"] = "".join(texts)
    thoughts = [block.text for block in reply.blocks if isinstance(block, Reasoning)]
    if any(thoughts):
        message["reasoning_content"] = "".join(thoughts)
    signed = thinking_blocks_of(reply.blocks)
    if signed:
        message["thinking_blocks"] = signed
    calls = [block for block in reply.blocks if isinstance(block, ToolCall)]
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
    finish = STOP_TO_FINISH.get(reply.stop) if reply.stop is not None else None
    written: JSON = {
        "id": reply.id,
        "object": "chat.completion",
        "created": created if created is not None else int(time.time()),
        "model": reply.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
    }
    if reply.usage is not None:
        written["usage"] = usage_fields(reply.usage)
    return written


def thinking_blocks_of(blocks: tuple[Block, ...]) -> list[JSON]:
    """The reasoning blocks that can go back to their model (signed, or redacted) as
    chat's ``thinking_blocks``; reasoning without a signature has only
    ``reasoning_content``."""
    written: list[JSON] = []
    for block in blocks:
        if isinstance(block, Reasoning):
            if block.redacted:
                written.append({"type": "redacted_thinking", "data": block.redacted})
            elif block.signature:
                thought = {"type": "thinking", "thinking": block.text}
                written.append({**thought, "signature": block.signature})
    return written


def read_thinking_blocks(value: Any) -> tuple[Reasoning, ...]:
    """Chat's ``thinking_blocks`` as reasoning blocks, in order (entries of another
    shape are skipped: the list is Parley's and LiteLLM's extension, not OpenAI's)."""
    found: list[Reasoning] = []
    for entry in value if isinstance(value, list) else ():
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "redacted_thinking" and isinstance(entry.get("data"), str):
            found.append(Reasoning(redacted=entry["data"]))
        elif kind == "thinking" and isinstance(entry.get("thinking"), str):
            signature = entry.get("signature")
            signed = signature if isinstance(signature, str) and signature else None
            found.append(Reasoning(entry["thinking"], signature=signed))
    return tuple(found)


def arguments_text(value: Any) -> str:
    """A tool's input as the JSON text OpenAI carries in ``arguments``."""
    return orjson.dumps(value if value is not None else {}).decode()
