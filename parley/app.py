"""create_app(settings) → the aiohttp application, its middleware and its lifecycle.

Middleware, outermost first:

* ``errors``: every failure becomes the OpenAI envelope; nothing else reaches a caller.
* ``v1_auth``: ``/v1`` calls are authenticated (stage 1 of the pipeline) and every reply
  to an authenticated caller carries the rate-limit headers.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from parley.admin.site import admin_app
from parley.api.context import CALLER, REPLY_HEADERS, SERVICES
from parley.api.routes import add_routes
from parley.errors import (
    INTERNAL_ERROR_MESSAGE,
    ParleyError,
    error_response,
    http_exception_as_error,
)
from parley.limits.headers import rate_limit_headers
from parley.pipeline.admit import scopes_for
from parley.pipeline.authenticate import authenticate
from parley.services import Services
from parley.settings import Settings
from parley.store.base import Store

log = logging.getLogger("parley")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ParleyError as error:
        return error_response(error, request.get(REPLY_HEADERS))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(http_exception_as_error(exc), request.get(REPLY_HEADERS))
    except Exception:  # the one boundary where anything unexpected becomes a clean 500
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(ParleyError(INTERNAL_ERROR_MESSAGE), request.get(REPLY_HEADERS))


@web.middleware
async def v1_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith("/v1/"):
        return await handler(request)
    svc = request.app[SERVICES]
    request[CALLER] = await authenticate(request.headers.get("Authorization"), svc.directory)
    try:
        response = await handler(request)
    except ParleyError:
        await _ensure_limit_headers(request, svc)
        raise
    if not response.prepared:
        await _ensure_limit_headers(request, svc)
        response.headers.update(request[REPLY_HEADERS])
    return response


async def _ensure_limit_headers(request: web.Request, svc: Services) -> None:
    """Calls that did not pass admission report the limits as they stand."""
    if REPLY_HEADERS in request:
        return
    try:
        decision = await svc.limiter.peek(scopes_for(request[CALLER]))
    except ParleyError:  # limits unavailable (Redis down, `reject`): the reply goes without
        request[REPLY_HEADERS] = {}
        return
    request[REPLY_HEADERS] = rate_limit_headers(decision)


def create_app(settings: Settings, *, store: Store | None = None) -> web.Application:
    app = web.Application(
        middlewares=[errors, v1_auth], client_max_size=settings.server.max_body_bytes
    )
    add_routes(app)
    app.add_subapp("/admin", admin_app(settings))
    app.router.add_get("/health", health)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        app[SERVICES] = await Services.start(settings, store=store)
        yield
        await app[SERVICES].close()

    app.cleanup_ctx.append(lifecycle)
    return app


async def health(request: web.Request) -> web.Response:
    svc = request.app[SERVICES]
    return web.json_response({"status": "ok", "usage_backlog": svc.meter.writer.backlog})
