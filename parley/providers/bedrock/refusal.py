"""Bedrock's errors as ``UpstreamRefused``, by the exception's name.

An error answer names its exception in the ``x-amzn-ErrorType`` header
(``ValidationException:http://...``) or the body's ``__type``, with a ``message``; a
stream's exception frame names it in ``:exception-type`` (camelCase). The name decides
the status Parley acts on: a ``ValidationException`` is the request's fault (400, its
message relayed, redacted); a throttled, unready or failing model, an outage, or the
channel's own credentials refused (``AccessDeniedException``, a bad signature) are the
channel's, a message naming only the channel, and the next channel is tried.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from parley.dialects.bedrock_converse import error_message
from parley.domain.wire import JSON
from parley.errors import UpstreamRefused
from parley.providers.openai.refusal import refusal as openai_refusal
from parley.providers.openai.refusal import rejected

STATUSES = {
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "UnrecognizedClientException": 403,
    "InvalidSignatureException": 403,
    "ExpiredTokenException": 403,
    "IncompleteSignatureException": 403,
    "ResourceNotFoundException": 404,
    "ThrottlingException": 429,
    "ServiceQuotaExceededException": 429,
    "ModelNotReadyException": 503,
    "ServiceUnavailableException": 503,
    "InternalServerException": 500,
    "ModelErrorException": 502,
    "ModelStreamErrorException": 502,
    "ModelTimeoutException": 504,
}
"""Bedrock's exceptions → the status Parley treats them as (a 4xx other than 400 and
every 5xx fail over)."""


def exception_name(value: str) -> str:
    """``ValidationException`` from ``ValidationException:http://...``,
    ``com.amazon.coral.validate#ValidationException`` or ``validationException``."""
    name = value.split(":", 1)[0].rsplit("#", 1)[-1].strip()
    return name[:1].upper() + name[1:]


def refusal(
    channel: str,
    status: int,
    raw: bytes,
    secret: str | None,
    headers: Mapping[bytes, bytes],
) -> UpstreamRefused:
    """The error for an HTTP answer ``status`` with body ``raw``."""
    kind = headers.get(b"x-amzn-errortype", b"").decode("latin-1")
    if not kind:
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("__type"), str):
            kind = body["__type"]
    name = exception_name(kind) if kind else ""
    mapped = STATUSES.get(name, status)
    envelope = {"error": {"message": error_message(raw), "type": "invalid_request_error"}}
    if name:
        envelope["error"]["code"] = name
    return openai_refusal(channel, mapped, orjson.dumps(envelope), secret, headers)


def stream_failure(channel: str, event: JSON, secret: str | None) -> UpstreamRefused:
    """The error for an exception (or error) frame inside a stream that had started."""
    name = exception_name(str(event.get("type") or ""))
    status = STATUSES.get(name, 502)
    if status == 400:
        message = event.get("message")
        envelope = {"error": {"message": message, "type": "invalid_request_error", "code": name}}
        return rejected(400, envelope, secret)
    return UpstreamRefused(
        f"The upstream channel `{channel}` failed during the stream ({name or 'error'}).",
        upstream_status=status,
        retryable=True,
    )
