"""Turning an upstream's error answer into ``UpstreamRefused``, without leaking its details.

A refusal another channel may not share (5xx, 429, the channel's own 401 or 403, an
unexpected redirect) gets a message naming only the channel. A refusal of the request
itself (400, 404, 422...) relays the upstream's own message, so the caller can fix it.
"""

from __future__ import annotations

from typing import Any

import orjson

from parley.providers.base import UpstreamRefused

MESSAGE_LIMIT = 500
_CHANNEL_FAULTS = frozenset({401, 403, 429, 404})


def is_retryable(status: int) -> bool:
    """Whether another channel may succeed where one answering ``status`` failed."""
    return status >= 500 or status < 400 or status in _CHANNEL_FAULTS


def refusal(channel: str, status: int, raw: bytes) -> UpstreamRefused:
    """The error for an HTTP answer with ``status`` (3xx, 4xx or 5xx) and body ``raw``."""
    if is_retryable(status):
        message = f"The upstream channel `{channel}` failed (status {status})."
        return UpstreamRefused(message, upstream_status=status, retryable=True)
    message = (
        upstream_message(_parse(raw)) or f"The upstream rejected the request (status {status})."
    )
    return UpstreamRefused(message, upstream_status=status, retryable=False)


def stream_failure(channel: str, envelope: dict[str, Any]) -> UpstreamRefused:
    """The error for an error event inside a stream that had started (HTTP 200).

    The envelope's ``code``, when it is a 4xx status (vLLM puts one there), says the
    request was at fault and its message is relayed; anything else is the upstream's
    failure, a 502 naming only the channel.
    """
    details = envelope.get("error")
    code = details.get("code") if isinstance(details, dict) else None
    if isinstance(code, int) and 400 <= code < 500:
        message = (
            upstream_message(envelope) or f"The upstream rejected the request (status {code})."
        )
        return UpstreamRefused(message, upstream_status=code, retryable=False)
    error = UpstreamRefused(
        f"The upstream channel `{channel}` failed during the stream.",
        upstream_status=502,
        retryable=False,
    )
    error.status, error.type, error.code = 502, "upstream_error", "bad_gateway"
    return error


def upstream_message(reply: object) -> str | None:
    """The message of an OpenAI error envelope, or of the variants engines send."""
    if not isinstance(reply, dict):
        return None
    details = reply.get("error")
    if isinstance(details, dict):
        message = details.get("message")
    elif isinstance(details, str):
        message = details  # {"error": "..."}: Ollama's and TGI's native shape
    elif isinstance(reply.get("detail"), str):
        message = reply["detail"]  # {"detail": "..."}: FastAPI's shape (speaches)
    else:
        message = reply.get("message") if reply.get("object") == "error" else None  # old vLLM
    if not isinstance(message, str) or not message.strip():
        return None
    return _truncate(message.strip())


def _truncate(message: str) -> str:
    if len(message) <= MESSAGE_LIMIT:
        return message
    return message[: MESSAGE_LIMIT - 1] + "…"


def _parse(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
