"""The error tree (the envelope is rendered by ``parley.api.reply.error_response``).

Every error a caller can see is a ``ParleyError``; the edge (``parley/app.py``) renders it as::

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
    ├── AlreadyExists                409 invalid_request_error   a name or label that is taken
    ├── PayloadTooLarge              413 invalid_request_error   body or image too large
    ├── RateLimited                  429 requests | tokens       code rate_limit_exceeded
    ├── QuotaExceeded                429 insufficient_quota      code insufficient_quota
    ├── UpstreamError                502 upstream_error          provider unreachable or broken
    │   ├── UpstreamTimeout          504 upstream_error          provider too slow
    │   ├── UpstreamUnreachable      502 upstream_error          no connection: never sent
    │   └── UpstreamRefused          502 upstream_error          the upstream answered with an error
    │       ├── UpstreamRejected     400, 413, 422               it refused the request itself: its
    │       │                        invalid_request_error       message, type, code, param relayed
    │       └── UpstreamModelMissing 502 upstream_error          it has no such model (404): the
    │                                code upstream_model_not_found   gateway is misconfigured
    ├── ServiceUnavailable           503 server_error            e.g. shutting down
    └── HttpStatusError              aiohttp's status            its router, body limit or
                                     invalid_request_error       handler timeout chose the
                                     (server_error from 500)     status

An error is immutable: its class fixes its meaning (status, type, code), and what an
instance carries (message, param, a code of its own, headers) is given when it is made
and never changed after, so every layer that sees it reads the same answer.
``UpstreamRejected`` stays under ``UpstreamRefused``: the relay and the breakers see it
as an upstream's answer (told to them, never retried), the caller as a 4xx.

Foreign exceptions (upstream HTTP client errors, timeouts) are mapped to this tree at the
boundary where they happen: ``providers.base.upstream_errors``.

A caller of Anthropic's Messages API (``/v1/messages``) gets the same errors in that
dialect's shape, with the same status and headers: that shape is the Anthropic codec's
(``dialects/anthropic_messages_reply.error_body``), as every dialect's own words are.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from parley.sse import json_event

_FIXED = frozenset(
    {"status", "type", "code", "message", "param", "headers"}
    | {"upstream_status", "retryable", "retry_after"}
)


class ParleyError(Exception):
    """An error a caller sees; its fields are fixed once it is made (``__setattr__``).

    A subclass whose status or type depends on what happened sets them before calling
    ``ParleyError.__init__``, which seals the instance."""

    status = 500
    type = "server_error"
    code: str | None = None

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
        self.headers: Mapping[str, str] = MappingProxyType(dict(headers or {}))
        self._sealed = True

    def __setattr__(self, name: str, value: object) -> None:
        if name in _FIXED and getattr(self, "_sealed", False):
            raise AttributeError(f"{type(self).__name__}.{name} is fixed when the error is made")
        super().__setattr__(name, value)

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
        self.status = status
        super().__init__(message, code=code, headers=headers)


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
            f"The model `{model}` does not exist or you do not have access to it. "
            "GET /v1/models lists the models your key can use.",
            param="model",
        )


class AlreadyExists(ParleyError):
    status = 409
    type = "invalid_request_error"
    code: str | None = "conflict"


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
        self.type = kind
        super().__init__(message, headers=headers)


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


class UpstreamUnreachable(UpstreamError):
    """No connection to the upstream: the request never left, and the whole channel is
    at fault, not one of its models."""


class UpstreamRefused(UpstreamError):
    """The upstream answered with an error status (or an error event in a stream) that is
    its own failure: the caller sees a 502 naming only the channel.

    ``retryable`` says whether another channel may succeed where this one failed (5xx,
    429, or the channel's own credentials refused)."""

    retryable: bool = True
    retry_after: float | None = None
    detail: str | None = None
    upstream_status: int

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int,
        retryable: bool,
        retry_after: float | None = None,
        detail: str | None = None,
    ) -> None:
        self.upstream_status = upstream_status
        self.retryable = retryable
        self.retry_after = retry_after
        """Seconds the upstream asked to be left alone (its ``retry-after``), if it did."""
        self.detail = detail
        """The upstream's own message, redacted, for the operator (a channel test); never
        sent to a caller, whose message names only the channel."""
        super().__init__(message)


RELAYED_HEADER = "x-parley-upstream-error"
RELAYED_MARK = "relayed"
"""The header on an error relayed from the upstream: its message (redacted), type, code
and param are the upstream's own. It names no channel, URL or key."""
RELAYED_STATUSES = frozenset({400, 413, 422})
"""The upstream's statuses a relayed refusal keeps; any other 4xx is told as a 400."""


class UpstreamRejected(UpstreamRefused):
    """The upstream refused the request itself (a 4xx that another channel would repeat):
    the caller sees the upstream's status (400, 413 or 422; 400 for any other), message,
    type, code and param (redacted by ``providers.openai.refusal``), marked by the
    ``RELAYED_HEADER``. Never retried on another channel."""

    status = 400
    type = "invalid_request_error"
    code: str | None = None
    retryable = False

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int,
        kind: str | None = None,
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        if upstream_status in RELAYED_STATUSES:
            self.status = upstream_status
        if kind is not None:
            self.type = kind
        self.upstream_status = upstream_status
        ParleyError.__init__(
            self, message, param=param, code=code, headers={RELAYED_HEADER: RELAYED_MARK}
        )


class UpstreamModelMissing(UpstreamRefused):
    """The upstream answered 404 to a model's call: it has no model by the upstream name
    the gateway's configuration gives (or no such address). The caller's request is not
    at fault and another try would get the same answer, so it is a 502 that says the
    model is misconfigured on the gateway, with ``x-should-retry: false`` (the official
    SDKs otherwise retry every 5xx)."""

    code = "upstream_model_not_found"

    def __init__(self, model: str, channel: str) -> None:
        self.upstream_status = 404
        self.retryable = False
        self.retry_after = None
        self.detail = None
        ParleyError.__init__(
            self,
            f"The model `{model}` is misconfigured on this gateway: its upstream (channel"
            f" `{channel}`) has no such model (it answered 404). Retrying will not help;"
            " the gateway's operator must correct the channel's model name or base URL.",
            param="model",
            headers={"x-should-retry": "false"},
        )


class ServiceUnavailable(ParleyError):
    status = 503
    code = "service_unavailable"


class HttpStatusError(ParleyError):
    """A refusal or failure whose status aiohttp chose (``web.HTTPException``, its handler
    timeout), in the envelope: ``invalid_request_error`` below 500, ``server_error`` from."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.type = "invalid_request_error" if status < 500 else "server_error"
        super().__init__(message, code=code, headers=headers)


INTERNAL_ERROR_MESSAGE = "The server had an error while processing your request."


def encode_error_event(error: ParleyError) -> bytes:
    """The envelope as a Server-Sent Event, for errors that happen mid-stream."""
    return json_event(error.body())
