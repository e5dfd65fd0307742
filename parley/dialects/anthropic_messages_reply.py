"""Anthropic Messages' replies as a dialect: ``message`` objects, stop reasons and usage.

``decode_reply`` reads an Anthropic upstream's ``message`` into the canonical ``Reply``,
and ``encode_reply`` writes one for a Messages caller; ``read_usage`` and
``usage_fields`` do the same for usage (Anthropic's ``input_tokens`` leaves out the
cached ones, which ``Usage.prompt_tokens`` counts), and the stop reasons map both ways.
It stands apart from the request half (``anthropic_messages``) because the stream
translators need these names and nothing of the request's: a Messages stream ends with
a stop reason and carries usage in this shape.

A caller's errors are this dialect's too: ``error_body`` is Anthropic's error shape,
``{"type": "error", "error": {"type", "message"}}``, its type named by the status
(``ERROR_TYPES``), and ``error_event`` the ``error`` event a failed stream ends with.
"""

from __future__ import annotations

from typing import Any

import orjson

from parley import upstream_json
from parley.dialects.anthropic_messages import write_block
from parley.dialects.canonical import Block, Reasoning, Reply, Stop, Text, ToolCall
from parley.domain.usage import Usage, reported_counts
from parley.domain.wire import JSON
from parley.errors import ParleyError
from parley.sse import json_event

REQUIRED = ("input_tokens", "output_tokens")
"""The counts an Anthropic usage object must hold; its cache counts may be absent."""
STOP_REASONS: dict[str, Stop] = {
    "end_turn": "end",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "pause_turn": "pause",
}
STOP_TO_REASON: dict[Stop, str] = {
    "end": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "stop_sequence": "stop_sequence",
    "content_filter": "refusal",
    "pause": "pause_turn",
}


def decode_reply(reply: JSON) -> Reply:
    """A Messages ``message`` object as the canonical reply."""
    blocks: list[Block] = []
    for block in reply.get("content") or ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            blocks.append(Text(str(block.get("text", ""))))
        elif kind == "tool_use":
            arguments = orjson.dumps(block.get("input", {})).decode()
            blocks.append(ToolCall(str(block.get("id", "")), str(block.get("name")), arguments))
        elif kind == "thinking":
            blocks.append(Reasoning(str(block.get("thinking", "")), block.get("signature")))
        elif kind == "redacted_thinking":
            blocks.append(Reasoning(redacted=str(block.get("data", ""))))
    reason = reply.get("stop_reason")
    sequence = reply.get("stop_sequence")
    return Reply(
        id=str(reply.get("id") or ""),
        model=str(reply.get("model") or ""),
        blocks=tuple(blocks),
        stop=STOP_REASONS.get(reason) if isinstance(reason, str) else None,
        usage=read_usage(reply.get("usage")),
        stop_sequence=sequence if isinstance(sequence, str) else None,
    )


def read_usage(usage: Any) -> Usage | None:
    """Anthropic's ``usage`` as ``Usage``: ``prompt_tokens`` is input, cache reads and
    cache writes together. ``None`` without an input and an output count, or with any
    number that is not a count (``reported_counts`` refuses and logs it)."""
    if not isinstance(usage, dict):
        return None
    counts = reported_counts(
        {
            "input_tokens": usage.get("input_tokens"),
            "output_tokens": usage.get("output_tokens"),
            "cache_read_input_tokens": usage.get("cache_read_input_tokens"),
            "cache_creation_input_tokens": usage.get("cache_creation_input_tokens"),
        },
        source="the Anthropic upstream",
        required=REQUIRED,
    )
    if counts is None:
        return None
    read, write = counts["cache_read_input_tokens"], counts["cache_creation_input_tokens"]
    return Usage(
        prompt_tokens=counts["input_tokens"] + read + write,
        completion_tokens=counts["output_tokens"],
        cached_tokens=read,
        cache_write_tokens=write,
    )


def usage_fields(usage: Usage) -> JSON:
    """``usage`` in Anthropic's shape (``input_tokens`` without the cached ones)."""
    fresh = max(0, usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens)
    return {
        "input_tokens": fresh,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "output_tokens": usage.completion_tokens,
    }


def encode_reply(reply: Reply, usage: Usage) -> JSON:
    """The canonical reply as a Messages ``message`` (the job sets id and model)."""
    content: list[JSON] = []
    for block in reply.blocks:
        if isinstance(block, Reasoning) and block.redacted is None:
            content.append(
                {"type": "thinking", "thinking": block.text, "signature": block.signature or ""}
            )
        elif isinstance(block, ToolCall):
            content.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": _reply_arguments(block.arguments),
                }
            )
        elif isinstance(block, Text | Reasoning):
            content.append(write_block(block))
    stop = STOP_TO_REASON.get(reply.stop) if reply.stop is not None else "end_turn"
    return {
        "id": reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": reply.stop_sequence,
        "usage": usage_fields(usage),
    }


def _reply_arguments(arguments: str) -> Any:
    """A tool call's arguments as its input: an object, or ``{}`` for what is not one (a
    model that wrote broken JSON)."""
    try:
        value = upstream_json.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""Anthropic's error type for a status; other 4xx are ``invalid_request_error``, other
5xx ``api_error``."""


def error_body(error: ParleyError) -> dict[str, Any]:
    """The error in Anthropic's shape, for a Messages caller. The shape has no ``param``,
    so the message names it first, as Anthropic's own do (``max_tokens: ...``)."""
    status = error.status
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    message, param = error.message, error.param
    if param and message.startswith(f"'{param}' "):  # "'x' must be..." reads "x: must be..."
        message = f"{param}: {message[len(param) + 3 :]}"
    elif param and not message.startswith(param):
        message = f"{param}: {message}"
    return {"type": "error", "error": {"type": kind, "message": message}}


def error_event(error: ParleyError) -> bytes:
    """The error as Anthropic's ``error`` event, for a Messages stream that failed."""
    return json_event(error_body(error), "error")
