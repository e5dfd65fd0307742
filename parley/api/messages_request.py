"""A Messages body (``POST /v1/messages`` and ``count_tokens``) read and checked: what
every route needs of it, and the prompt's estimate. A large body is read by the same
functions in a body process (``api/apart.py``)."""

from __future__ import annotations

from typing import Any

import orjson

from parley.api.body import sampling
from parley.dialects import anthropic_messages, openai_chat
from parley.dialects.canonical import Unsupported
from parley.domain.tokens import CHARS_PER_TOKEN, TOKENS_PER_IMAGE, estimate_text, prompt_ceiling
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import InvalidRequest

SERVICE_TIERS = {"auto": "auto", "standard_only": "default"}
"""Anthropic's ``service_tier`` as OpenAI's: ``standard_only`` is OpenAI's ``default``."""
ANTHROPIC_MOST_TEMPERATURE = 1.0
"""Anthropic's range of ``temperature`` is 0 to 1 (OpenAI's, 0 to 2)."""


@value
class MessagesRequest:
    """A Messages body, checked as far as any route needs; a translating route reads it
    whole (``canonical``) and refuses what its upstream cannot take."""

    model: str
    body: dict[str, Any]
    stream: bool
    max_tokens: int
    prompt_estimate: int
    beta: str | None
    prompt_ceiling: int = 0
    """The most prompt tokens the body can cost (``domain.tokens.prompt_ceiling``)."""
    images: int = 0
    """The image blocks in ``messages``."""


def parse_messages(body: dict[str, Any], beta: str | None, body_bytes: int) -> MessagesRequest:
    """What every route needs checked: the model, ``max_tokens``, ``messages`` and the
    sampling parameters (in Anthropic's ranges); ``body_bytes`` is the size of the JSON
    body (for the prompt's ceiling)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string.", param="model")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise InvalidRequest("'max_tokens' must be a positive integer.", param="max_tokens")
    _require_messages(body)
    sampling(body, ANTHROPIC_MOST_TEMPERATURE)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise InvalidRequest("'stream' must be a boolean.", param="stream")
    estimate = _estimate(body)
    images = _images(body.get("messages"))
    ceiling = prompt_ceiling(body_bytes, images)
    return MessagesRequest(
        model, body, stream, max_tokens, estimate, beta, max(estimate, ceiling), images
    )


def parse_count(body: dict[str, Any], beta: str | None) -> MessagesRequest:
    """A ``count_tokens`` body: a model and a conversation (nothing is generated)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string.", param="model")
    _require_messages(body)
    estimate = _estimate(body)
    return MessagesRequest(model, body, False, 0, estimate, beta, 0, _images(body.get("messages")))


def _require_messages(body: dict[str, Any]) -> None:
    """Both routes take a conversation: a non-empty array under ``messages``."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array.", param="messages")


def _estimate(body: dict[str, Any]) -> int:
    """The prompt's tokens, estimated: a token per four characters of text (system,
    messages, tool definitions and calls), a fixed count per image."""
    total = 3
    for message in body.get("messages") or ():
        content = message.get("content") if message.__class__ is dict else None
        if content.__class__ is str:  # the common case, without a call
            total += 4 + (len(content) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
        else:
            total += 4 + _estimate_content(content)
    total += _estimate_content(body.get("system"))
    if body.get("tools"):
        total += estimate_text(orjson.dumps(body["tools"]).decode())
    return total


def _estimate_content(content: Any) -> int:
    if isinstance(content, str):
        return estimate_text(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "image":
            total += TOKENS_PER_IMAGE
        elif kind in ("text", "thinking") and isinstance(block.get(kind), str):
            total += estimate_text(block[kind])
        elif kind == "tool_use":
            total += estimate_text(orjson.dumps(block.get("input")).decode())
        elif kind == "tool_result":
            total += _estimate_content(block.get("content"))
    return total


def _images(messages: Any) -> int:
    """The image blocks in Messages ``messages``."""
    count = 0
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if message.__class__ is dict else None
        if content.__class__ is list:
            count += sum(
                1 for block in content if isinstance(block, dict) and block.get("type") == "image"
            )
    return count


def as_chat(body: JSON, model: str, *, signed: bool, tiered: bool) -> JSON:
    """A Messages body read whole (``dialects/anthropic_messages.py``) and written as an
    OpenAI chat body for ``model``: signed thinking kept when ``signed`` (for an adapter
    that reads the chat body back), the service tier asked for when ``tiered``. What the
    canonical call cannot say is a 400 naming it."""
    try:
        request = anthropic_messages.decode_request(body)
        chat = openai_chat.encode_request(request, model, thinking_blocks=signed)
    except Unsupported as error:
        raise InvalidRequest(error.message, param=error.param) from None
    tier = body.get("service_tier")
    if tier is not None and tiered:
        chat["service_tier"] = SERVICE_TIERS[tier]
    return chat
