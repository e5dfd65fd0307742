"""Turning an upstream's error answer into ``UpstreamRefused`` or ``UpstreamRejected``,
without leaking its details.

A refusal another channel may not share (5xx, 429, the channel's own 401 or 403, an
unexpected redirect) gets a message naming only the channel. A refusal of the request
itself (400, 413, 422...) relays the upstream's own message, with the channel's key and
anything shaped like a credential taken out, and its ``type``, ``code`` and ``param``
when they are plain names (LangChain, for one, acts on ``context_length_exceeded``).

A refusal keeps the upstream's own hint of when to come back (``retry_after``), which
the breakers take as their cool-down: ``retry-after-ms``, ``retry-after`` (seconds, or an
HTTP date counted from the reply's ``Date``), or, for a limit the reply says is spent
(``x-ratelimit-remaining-requests`` or ``-tokens`` at 0), OpenAI's
``x-ratelimit-reset-requests`` or ``-tokens`` (durations such as ``6m0s``). A provider
whose hint is in its body (Google's ``RetryInfo``) reads it and passes it as ``hint``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import orjson

from parley.errors import UpstreamRefused, UpstreamRejected
from parley.providers.redaction import redact


@dataclass(frozen=True, slots=True)
class Relayed:
    """What an upstream said about a request it refused, safe to hand to the caller."""

    message: str
    type: str | None = None
    code: str | None = None
    param: str | None = None


MESSAGE_LIMIT = 500
_CHANNEL_FAULTS = frozenset({401, 403, 429, 404})
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.:\[\]-]{1,64}\Z")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:h|ms|m|s))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_RESETS = (
    (b"x-ratelimit-remaining-requests", b"x-ratelimit-reset-requests"),
    (b"x-ratelimit-remaining-tokens", b"x-ratelimit-reset-tokens"),
)


def is_retryable(status: int) -> bool:
    """Whether another channel may succeed where one answering ``status`` failed."""
    return status >= 500 or status < 400 or status in _CHANNEL_FAULTS


def refusal(
    channel: str,
    status: int,
    raw: bytes,
    secret: str | None,
    headers: Mapping[bytes, bytes] | None = None,
    *,
    hint: float | None = None,
) -> UpstreamRefused:
    """The error for an HTTP answer with ``status`` (3xx, 4xx or 5xx), body ``raw`` and
    ``headers`` (whose retry hint it keeps, or else ``hint``, the provider's own from the
    body); ``secret`` is the channel's key, never relayed."""
    if is_retryable(status):
        message = f"The upstream channel `{channel}` failed (status {status})."
        said = upstream_message(_parse(raw))
        told = retry_after(headers) if headers is not None else None
        return UpstreamRefused(
            message,
            upstream_status=status,
            retryable=True,
            retry_after=told if told is not None else hint,
            detail=_redacted(said, secret) if said is not None else None,
        )
    return rejected(status, _parse(raw), secret)


def rejected(status: int, reply: object, secret: str | None) -> UpstreamRejected:
    """The upstream's refusal of the request itself (a 4xx ``status``, whose answer is
    ``reply``), relayed to the caller as far as it is safe (``relayed``)."""
    said = relayed(reply, f"The upstream rejected the request (status {status}).", secret)
    return UpstreamRejected(
        said.message, upstream_status=status, kind=said.type, code=said.code, param=said.param
    )


def retry_after(headers: Mapping[bytes, bytes]) -> float | None:
    """The seconds an upstream's headers ask it be left alone (see the module's doc),
    when they say so sanely; ``None`` when they do not."""
    for name, scale in ((b"retry-after-ms", 1000.0), (b"retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        text = value.decode("latin-1").strip()
        try:
            seconds = _positive(float(text) / scale)
        except ValueError:
            seconds = _until(text, headers.get(b"date")) if scale == 1.0 else None
        if seconds is not None:
            return seconds
    found: list[float] = []
    for remaining, reset in _RESETS:
        left, when = headers.get(remaining), headers.get(reset)
        if left is not None and left.strip() == b"0" and when is not None:
            seconds = duration(when.decode("latin-1"))
            if seconds is not None:
                found.append(seconds)
    return max(found, default=None)


def duration(text: str) -> float | None:
    """Seconds in a duration as OpenAI's reset headers write it (hours, minutes, seconds
    and milliseconds, each with its unit) or as Google's ``retryDelay`` does (seconds
    with a fraction); ``None`` if it is not one, or not positive."""
    text = text.strip()
    if not _DURATION.fullmatch(text):
        return None
    seconds = sum(
        float(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text)
    )
    return _positive(seconds)


def _until(when: str, date: bytes | None) -> float | None:
    """Seconds from the reply's ``Date`` to the HTTP date ``when`` (no clock of our
    own: both are the upstream's)."""
    if date is None:
        return None
    try:
        later = parsedate_to_datetime(when)
        now = parsedate_to_datetime(date.decode("latin-1"))
    except (TypeError, ValueError):
        return None
    if later.tzinfo is None or now.tzinfo is None:
        return None
    return _positive((later - now).total_seconds())


def _positive(seconds: float) -> float | None:
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def stream_failure(channel: str, envelope: dict[str, Any], secret: str | None) -> UpstreamRefused:
    """The error for an error event inside a stream that had started (HTTP 200).

    The envelope's ``code``, when it is a 4xx status (vLLM puts one there), says the
    request was at fault and what it says is relayed; anything else is the upstream's
    failure, a 502 naming only the channel.
    """
    code = _details(envelope).get("code")
    if isinstance(code, int) and 400 <= code < 500:
        return rejected(code, envelope, secret)
    return UpstreamRefused(
        f"The upstream channel `{channel}` failed during the stream.",
        upstream_status=502,
        retryable=False,
    )


def relayed(reply: object, fallback: str, secret: str | None) -> Relayed:
    """What of an upstream's error answer may reach the caller: its message, redacted
    and bounded (``fallback`` when it gave none), and its plain ``type``, ``code`` and
    ``param``."""
    details = _details(reply)
    message = upstream_message(reply)
    return Relayed(
        message=_redacted(message, secret) if message is not None else fallback,
        type=_plain(details.get("type"), secret),
        code=_plain(details.get("code"), secret),
        param=_plain(details.get("param"), secret),
    )


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
    return message.strip()


def _details(reply: object) -> dict[str, Any]:
    """The object holding ``type``, ``code`` and ``param``: OpenAI's ``error``, or the
    reply itself in old vLLM's ``{"object": "error", ...}``."""
    if not isinstance(reply, dict):
        return {}
    details = reply.get("error")
    if isinstance(details, dict):
        return details
    return reply if reply.get("object") == "error" else {}


def _plain(value: object, secret: str | None) -> str | None:
    """``value`` when it is a short plain name holding no credential, else ``None``."""
    if not isinstance(value, str) or not _PLAIN_NAME.match(value):
        return None
    return value if redact(value, secret) == value else None


def _redacted(message: str, secret: str | None) -> str:
    """Redacted, then cut to ``MESSAGE_LIMIT``: a credential cut in two by the limit
    would escape the patterns. Only the head is searched, well past the limit."""
    return _truncate(redact(message[: 4 * MESSAGE_LIMIT], secret))


def _truncate(message: str) -> str:
    if len(message) <= MESSAGE_LIMIT:
        return message
    return message[: MESSAGE_LIMIT - 1] + "…"


def _parse(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
