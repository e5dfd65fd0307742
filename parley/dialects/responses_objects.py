"""The Responses API's ``response`` object and its output items, as Parley writes them.

``skeleton`` is a response before any output (the request's settings echoed, as OpenAI's
replies and ``response.created`` events carry them); ``encode_response`` writes a
canonical reply into it, ``finished`` its end (status, output, usage) for a stream.
Output item ids name their response (``item_ids``), so an ``item_reference`` to one
later finds the stored response it came from (``response_of_item``).
"""

from __future__ import annotations

import itertools
import secrets
import string
import time
from collections.abc import Callable

from parley.dialects.canonical import Reasoning, Reply, Text, ToolCall
from parley.domain.usage import Usage
from parley.domain.wire import JSON


def new_id(prefix: str) -> str:
    """An id in OpenAI's style: ``resp_``, ``msg_``, ``fc_``, ``rs_`` and 48 hex digits."""
    return prefix + secrets.token_hex(24)


def input_ids() -> Callable[[str], str]:
    """Ids for one request's input items, in ``new_id``'s form: 32 random hex digits
    shared by the request's items and 16 that count them, so a body of a million items
    draws randomness once, not a million times."""
    token = secrets.token_hex(16)
    counter = itertools.count()
    return lambda prefix: f"{prefix}{token}{next(counter):016x}"


def item_ids(response_id: str) -> Callable[[str], str]:
    """Ids for a response's output items that name the response: ``msg_<its hex>_1``...
    so an ``item_reference`` to one later finds the stored response it came from."""
    token = response_id.removeprefix("resp_")
    counter = itertools.count(1)
    return lambda prefix: f"{prefix}{token}_{next(counter)}"


def response_of_item(item_id: str) -> str | None:
    """The id of the response an output item id made by ``item_ids`` belongs to."""
    _, _, rest = item_id.partition("_")
    token, _, number = rest.rpartition("_")
    if len(token) != 48 or not number.isdecimal() or not set(token) <= HEX:
        return None
    return "resp_" + token


HEX = frozenset(string.hexdigits.lower())


def skeleton(body: JSON, response_id: str, model: str, created_at: int | None = None) -> JSON:
    """The ``response`` object before any output: the request's settings echoed back, as
    OpenAI's replies and ``response.created`` events carry them."""
    text = body.get("text") if isinstance(body.get("text"), dict) else None
    reasoning = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else None
    tool_choice = body.get("tool_choice")
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at if created_at is not None else int(time.time()),
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": (reasoning or {}).get("effort"), "summary": None},
        "store": body.get("store", True) is not False,
        "temperature": body.get("temperature", 1.0),
        "text": {"format": (text or {}).get("format") or {"type": "text"}},
        "tool_choice": tool_choice if tool_choice is not None else "auto",
        "tools": [_tool_echo(tool) for tool in body.get("tools") or ()],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation") or "disabled",
        "usage": None,
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def _tool_echo(tool: JSON) -> JSON:
    return {"strict": tool.get("strict", True), "description": None, **tool}


STATUS_FOR_STOP = {"length": "max_output_tokens", "content_filter": "content_filter"}
"""Canonical stops that leave a response ``incomplete``, and OpenAI's reason for each."""


def finished(response: JSON, output: list[JSON], stop: str | None, usage: Usage | None) -> None:
    """Fill in a response's end: its output, status (``incomplete`` with its reason when
    the output limit or a filter cut it) and usage."""
    response["output"] = output
    reason = STATUS_FOR_STOP.get(stop or "")
    if reason is not None:
        response["status"] = "incomplete"
        response["incomplete_details"] = {"reason": reason}
    else:
        response["status"] = "completed"
    response["usage"] = usage_fields(usage) if usage is not None else None


ERROR_CODES = frozenset({"server_error", "rate_limit_exceeded", "invalid_prompt"})
"""The codes of OpenAI's closed list a failed response's ``error`` may have from Parley."""


def response_error(code: str | None, message: str) -> JSON:
    """A failed response's ``error``: its code one of OpenAI's (``server_error`` for any
    failure the list has no name for; the ``error`` event before it keeps Parley's)."""
    return {"code": code if code in ERROR_CODES else "server_error", "message": message}


def encode_response(
    reply: Reply, usage: Usage, response: JSON, ids: Callable[[str], str] = new_id
) -> JSON:
    """The canonical reply written into ``response`` (a ``skeleton``): its blocks as
    output items (reasoning, then the message's text, then each function call), each
    with an id from ``ids``."""
    output: list[JSON] = []
    thoughts = [block for block in reply.blocks if isinstance(block, Reasoning)]
    for thought in thoughts:
        output.append(reasoning_item(ids("rs_"), thought.text, thought.redacted))
    text = "".join(block.text for block in reply.blocks if isinstance(block, Text))
    if text:
        output.append(message_item(ids("msg_"), text))
    for block in reply.blocks:
        if isinstance(block, ToolCall):
            output.append(call_item(ids("fc_"), block.id, block.name, block.arguments))
    finished(response, output, reply.stop, usage)
    return response


def message_item(item_id: str, text: str, status: str = "completed") -> JSON:
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [text_part(text)] if status == "completed" else [],
    }


def text_part(text: str) -> JSON:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed"
) -> JSON:
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def reasoning_item(item_id: str, text: str, encrypted: str | None = None) -> JSON:
    """A reasoning item: its text both as the summary (what OpenAI's reasoning models
    show, and all some clients read) and as ``reasoning_text`` content (what it is)."""
    item: JSON = {"id": item_id, "type": "reasoning", "summary": []}
    if text:
        item["summary"] = [summary_part(text)]
        item["content"] = [{"type": "reasoning_text", "text": text}]
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def summary_part(text: str) -> JSON:
    return {"type": "summary_text", "text": text}


def usage_fields(usage: Usage) -> JSON:
    """``usage`` in the Responses shape: input tokens (those read from and written to the
    prompt cache counted in them and told in ``input_tokens_details``), output tokens
    (reasoning told apart) and total; every field the SDKs' types require."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }
