"""The error tree (the envelope is rendered by ``parley.api.reply.error_response``).

Every error a caller can see is a ``ParleyError``; the HTTP middleware renders it as::

    {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}

with the status the class carries. Anything else that escapes a handler is logged and
rendered as a 500 ``server_error`` whose message names no internal detail.

    ParleyError                      (500 server_error)
    ├── InvalidRequest               400 invalid_request_error   bad field, bad JSON, bad date
    │   ├── UnsupportedMediaType     415 invalid_request_error   wrong Content-Type
    │   ├── Replayed                 409 invalid_request_error   an idempotency key used before
    │   └── MalformedRequest         400, 414, 431, 505          the HTTP message itself is broken
    ├── RequestTimeout               408 invalid_request_error   the body did not arrive in time
    ├── AuthenticationFailed         401 invalid_request_error   code invalid_api_key
    ├── PermissionDenied             403 permission_error
    ├── NotFound                     404 invalid_request_error   unknown route or resource
    │   └── ModelNotFound            404 invalid_request_error   code model_not_found
    ├── PayloadTooLarge              413 invalid_request_error   body or image too large
    ├── RateLimited                  429 requests | tokens       code rate_limit_exceeded
    ├── QuotaExceeded                429 insufficient_quota      code insufficient_quota
    ├── UpstreamError                502 upstream_error          provider unreachable or broken
    │   └── UpstreamTimeout          504 upstream_error          provider too slow
    └── ServiceUnavailable           503 server_error            e.g. shutting down

Foreign exceptions (upstream HTTP client errors, timeouts) are mapped to this tree at the
boundary where they happen: ``providers.base.upstream_errors``.

A caller of Anthropic's Messages API (``/v1/messages``) gets the same errors in that
dialect's shape, ``{"type": "error", "error": {"type", "message"}}``, with the same status
and headers: ``anthropic_body`` names the type by the status (``ANTHROPIC_TYPES``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parley.sse import json_event


class ParleyError(Exception):
    status = 500
    type = "server_error"
    code: str | None = None
    channel = ""
    """The channel whose upstream failed, when one did (set by the relay; never shown)."""

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.headers: dict[str, str] = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class InvalidRequest(ParleyError):
    status = 400
    type = "invalid_request_error"


class UnsupportedMediaType(InvalidRequest):
    status = 415
    code = "unsupported_media_type"


class Replayed(InvalidRequest):
    """A request whose idempotency key an earlier one used: what it asked for is done."""

    status = 409
    code = "idempotency_key_reused"


class MalformedRequest(InvalidRequest):
    """A request aiohttp's parser refused (``parley.edge``); the status names what broke."""

    code = "malformed_request"

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, code=code, headers=headers)
        self.status = status


class RequestTimeout(ParleyError):
    status = 408
    type = "invalid_request_error"
    code = "request_timeout"


class AuthenticationFailed(ParleyError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class PermissionDenied(ParleyError):
    status = 403
    type = "permission_error"
    code = "permission_denied"


class NotFound(ParleyError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"

    def __init__(self, model: str) -> None:
        super().__init__(
            f"The model `{model}` does not exist or you do not have access to it.",
            param="model",
        )


class PayloadTooLarge(ParleyError):
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class RateLimited(ParleyError):
    status = 429
    type = "requests"
    code = "rate_limit_exceeded"

    def __init__(
        self, message: str, *, kind: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message, headers=headers)
        self.type = kind


class QuotaExceeded(ParleyError):
    status = 429
    type = "insufficient_quota"
    code = "insufficient_quota"


class UpstreamError(ParleyError):
    status = 502
    type = "upstream_error"
    code: str | None = "bad_gateway"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class ServiceUnavailable(ParleyError):
    status = 503
    code = "service_unavailable"


INTERNAL_ERROR_MESSAGE = "The server had an error while processing your request."


def encode_error_event(error: ParleyError) -> bytes:
    """The envelope as a Server-Sent Event, for errors that happen mid-stream."""
    return json_event(error.body())


ANTHROPIC_TYPES = {
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


def anthropic_body(error: ParleyError) -> dict[str, Any]:
    """The error in Anthropic's shape, for a Messages caller. The shape has no ``param``,
    so the message names it first, as Anthropic's own do (``max_tokens: ...``)."""
    status = error.status
    kind = ANTHROPIC_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    message = error.message
    if error.param and not message.startswith(error.param):
        message = f"{error.param}: {message}"
    return {"type": "error", "error": {"type": kind, "message": message}}


def encode_anthropic_error_event(error: ParleyError) -> bytes:
    """The error as Anthropic's ``error`` event, for a Messages stream that failed."""
    return json_event(anthropic_body(error), "error")
