"""Google's errors (``{"error": {"code", "message", "status"}}``) as ``UpstreamRefused``.

An error status goes through the OpenAI adapter's ``refusal`` with Google's envelope
rewritten as OpenAI's (``status``, such as ``INVALID_ARGUMENT``, as the ``code``): a
429, a 5xx, or the channel's own 401/403/404 may succeed on another channel; a 400 is the
request's fault and its message is relayed, redacted. Google answers a bad API key with
a 400 (``API key not valid``): that is the channel's fault and is treated as a 401.

An error event inside a stream is the request's fault for a 4xx ``code`` (relayed) and
the upstream's otherwise (429, 5xx: a 502 naming only the channel, retryable, so a
stream that fails before its first batch falls over).

Google says when to come back in the body, not in a ``retry-after`` header: a
``RESOURCE_EXHAUSTED`` error's ``details`` hold a ``google.rpc.RetryInfo`` whose
``retryDelay`` is a duration (``"30s"``, ``"1.5s"``), kept as the refusal's
``retry_after`` for the breakers' cool-down (``retry_delay``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from parley import upstream_json
from parley.dialects.gemini import error_envelope, key_refused
from parley.domain.wire import JSON
from parley.errors import UpstreamRefused
from parley.providers.openai.refusal import duration, refusal, rejected

_ENUM = re.compile(r"[A-Z_]{1,40}")
"""A Google status name (``UNAVAILABLE``): the only part of a failure event that goes
into Parley's own message."""
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


def google_refusal(
    channel: str,
    status: int,
    raw: bytes,
    secret: str | None,
    headers: Mapping[bytes, bytes] | None = None,
) -> UpstreamRefused:
    """The error for an HTTP answer with ``status`` and Google's body ``raw``."""
    envelope = error_envelope(raw)
    if status == 400 and key_refused(envelope):
        status = 401
    body = orjson.dumps(envelope) if envelope is not None else raw
    return refusal(channel, status, body, secret, headers, hint=retry_delay(_parsed(raw)))


def retry_delay(body: Any) -> float | None:
    """The seconds of the ``RetryInfo.retryDelay`` in a Google error (``{"error":
    {"details": [...]}}``), or ``None`` when it gives none."""
    details = body.get("error") if isinstance(body, dict) else None
    entries = details.get("details") if isinstance(details, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict) and entry.get("@type") == RETRY_INFO:
            delay = entry.get("retryDelay")
            return duration(delay) if isinstance(delay, str) else None
    return None


def _parsed(raw: bytes) -> Any:
    try:
        return upstream_json.loads(raw)
    except orjson.JSONDecodeError:
        return None


def stream_failure(channel: str, event: JSON, secret: str | None) -> UpstreamRefused:
    """The error for an ``error`` event in a started stream."""
    details = event.get("error")
    details = details if isinstance(details, dict) else {}
    code = details.get("code")
    if isinstance(code, int) and 400 <= code < 500 and code != 429:
        envelope = {"error": {"message": details.get("message"), "code": details.get("status")}}
        return rejected(code, envelope, secret)
    status = details.get("status")
    kind = status if isinstance(status, str) and _ENUM.fullmatch(status) else "error"
    return UpstreamRefused(
        f"The upstream channel `{channel}` failed during the stream ({kind}).",
        upstream_status=code if isinstance(code, int) and code >= 429 else 502,
        retryable=True,
        retry_after=retry_delay(event),
    )
