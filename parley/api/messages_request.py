"""A Messages body (``POST /v1/messages`` and ``count_tokens``) read and checked: what
every route needs of it, and the prompt's estimate. A large body is read by the same
functions in a body process (``api/apart.py``)."""

from __future__ import annotations

from typing import Any

from parley.api.body import sampling
from parley.dialects import anthropic_messages
from parley.dialects.call import ANTHROPIC_MESSAGES, ChatCall
from parley.dialects.straight import estimate as estimate_texts
from parley.domain.tokens import TOKENS_PER_MESSAGE, prompt_ceiling
from parley.domain.value import value
from parley.errors import InvalidRequest

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

    def call(self) -> ChatCall:
        """The canonical call: the body as sent, read into a ``Request`` only on a route
        that translates it (``dialects/anthropic_messages.py``)."""
        return ChatCall(
            ANTHROPIC_MESSAGES, self.body, anthropic_messages.decode_request, beta=self.beta
        )


def parse_messages(
    body: dict[str, Any], beta: str | None, body_bytes: int, texts: list[str] | None = None
) -> MessagesRequest:
    """What every route needs checked: the model, ``max_tokens``, ``messages`` and the
    sampling parameters (in Anthropic's ranges); ``body_bytes`` is the size of the JSON
    body (for the prompt's ceiling). ``texts``: the messages' (``_estimate``)."""
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
    estimate, images = _estimate(body, texts)
    ceiling = prompt_ceiling(body_bytes, images)
    return MessagesRequest(
        model, body, stream, max_tokens, estimate, beta, max(estimate, ceiling), images
    )


def parse_count(
    body: dict[str, Any], beta: str | None, texts: list[str] | None = None
) -> MessagesRequest:
    """A ``count_tokens`` body: a model and a conversation (nothing is generated).
    ``texts``: the messages' (``_estimate``)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string.", param="model")
    _require_messages(body)
    estimate, images = _estimate(body, texts)
    return MessagesRequest(model, body, False, 0, estimate, beta, 0, images)


def _estimate(body: dict[str, Any], texts: list[str] | None) -> tuple[int, int]:
    """The prompt's estimate and image blocks (``anthropic_messages.estimate_prompt``).
    ``texts``, the messages' when they are a user's plain texts, each a string or a
    text block (``dialects.straight.plain_texts``, in a body process), are counted as
    ``estimate_prompt`` counts either, without a message read again: no image."""
    if texts is None:
        return anthropic_messages.estimate_prompt(body)
    rest, _ = anthropic_messages.estimate_prompt({**body, "messages": None})
    return rest + TOKENS_PER_MESSAGE * len(texts) + estimate_texts(texts), 0


def _require_messages(body: dict[str, Any]) -> None:
    """Both routes take a conversation: a non-empty array under ``messages``."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array.", param="messages")
