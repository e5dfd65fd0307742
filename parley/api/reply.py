"""Building JSON replies, and the one renderer of the OpenAI error envelope.

``parley.errors`` holds the error tree without the web stack, so the CLI can use it
without importing aiohttp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from parley.dialects import anthropic_messages_reply
from parley.errors import (
    HttpStatusError,
    NotFound,
    ParleyError,
    PayloadTooLarge,
)


def json_reply(
    payload: Any, headers: Mapping[str, str] | None = None, status: int = 200
) -> web.Response:
    return web.Response(
        status=status,
        body=orjson.dumps(payload),
        content_type="application/json",
        headers=dict(headers or {}),
    )


def error_response(
    error: ParleyError, headers: Mapping[str, str] | None = None, *, anthropic: bool = False
) -> web.Response:
    """Render ``error`` as the OpenAI envelope (the only place that builds one), or in
    Anthropic's shape for a caller of the Messages API (``anthropic``)."""
    merged = {**(headers or {}), **error.headers}
    if error.status >= 500 or error.status == 429:
        merged.setdefault(
            "x-should-retry", "true" if error.type != "insufficient_quota" else "false"
        )
    return web.Response(
        status=error.status,
        body=orjson.dumps(
            anthropic_messages_reply.error_body(error) if anthropic else error.body()
        ),
        content_type="application/json",
        headers=merged,
    )


def http_exception_as_error(exc: web.HTTPException, body_limit: int | None = None) -> ParleyError:
    """Map aiohttp's own routing and size errors into the tree; ``body_limit`` is the
    request's body cap in bytes, named in a 413 so the caller knows what fits."""
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        if body_limit is None:
            return PayloadTooLarge("The request body is too large.")
        mib = f" ({body_limit / 1_048_576:.1f} MiB)" if body_limit >= 1_048_576 else ""
        return PayloadTooLarge(
            f"The request body is too large: the limit is {body_limit} bytes{mib}."
        )
    if isinstance(exc, web.HTTPNotFound):
        return NotFound("Unknown request URL. Check the path and method.")
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return HttpStatusError(
            f"Method {exc.method} is not allowed for this URL.",
            status=exc.status,
            code="method_not_allowed",
            headers={"Allow": exc.headers["Allow"]},  # RFC 9110: a 405 names what is allowed
        )
    return HttpStatusError(exc.reason or "HTTP error", status=exc.status)
