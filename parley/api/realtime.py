"""``GET /v1/realtime?model=…``: a realtime session over WebSocket (docs/realtime.md).

Before the upgrade, everything that can be refused is refused as any call is, with the
OpenAI envelope and its status: the key (the gateway), the model (unknown or not the
group's: 404; not a ``kind: realtime`` model: 400), a request that is no WebSocket
upgrade (400), and an upstream that will not open a session (each of the model's
realtime channels tried in turn; 502 when none would); a cascade model
(``models[].cascade``) opens no upstream, Parley speaks it (``api.cascade``). Then
the caller's socket is upgraded (choosing the ``realtime`` subprotocol when offered, as
OpenAI does) and the session runs (``pipeline.realtime``) until either side ends it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

import aiohttp
from aiohttp import web

from parley.api.cascade import serve_cascade
from parley.errors import InvalidRequest, ServiceUnavailable, UpstreamError
from parley.pipeline.admit import resolve_model
from parley.pipeline.context import CALLER, CLIENT_SECRET, SERVICES
from parley.pipeline.realtime import RELAY, Session
from parley.pipeline.realtime_life import ENDPOINT, live_session
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.pipeline.started import note_started
from parley.providers.openai.realtime import REALTIME_TYPES, realtime_socket

log = logging.getLogger("parley.realtime")

KINDS = frozenset({"realtime"})
SUBPROTOCOL = "realtime"
NO_MODEL = "Name the model in the query: /v1/realtime?model=<model>."
NOT_UPGRADE = "This endpoint speaks WebSocket: connect with an upgrade request."


async def realtime_session(request: web.Request) -> web.StreamResponse:
    svc = request.app[SERVICES]
    caller = request[CALLER]
    secret = request.get(CLIENT_SECRET)
    name = request.query.get("model") or (secret.model if secret is not None else None)
    if not name:
        raise InvalidRequest(NO_MODEL, param="model", code="missing_model")
    model = resolve_model(svc.models, caller, name, KINDS, ENDPOINT)
    if secret is not None and secret.model not in (None, model.spec.name):
        raise InvalidRequest(
            f"This client secret opens sessions of `{secret.model}` only.", param="model"
        )
    settings = svc.settings.realtime
    socket = web.WebSocketResponse(
        protocols=(SUBPROTOCOL,),
        max_msg_size=settings.max_event_bytes,
        autoping=True,
        timeout=2.0,
        # Base64 audio hardly deflates: a zlib state each way would cost every session
        # memory and every event CPU for nothing (docs/performance.md, Realtime sessions).
        compress=False,
    )
    if not socket.can_prepare(request).ok:
        raise InvalidRequest(NOT_UPGRADE, code="websocket_required")
    if model.spec.cascade is not None:  # Parley speaks it from its parts
        bound = secret.session if secret is not None else None
        return await serve_cascade(request, model, socket, _aborter(request), bound)
    routes = [r for r in svc.router.routes(model.spec.name) if r.provider_type in REALTIME_TYPES]
    if not routes:
        raise ServiceUnavailable(
            f"No channel is configured to serve the realtime model `{model.spec.name}`."
        )
    async with contextlib.AsyncExitStack() as stack:
        upstream, route = await _open_upstream(svc, stack, routes, settings.max_event_bytes)
        note_started(request, socket)
        await socket.prepare(request)
        task = svc.in_flight.current()
        svc.in_flight.add(task)
        live = stack.enter_context(live_session(svc.live_sessions, caller, model.spec.name, RELAY))
        try:
            session = Session(
                svc,
                caller,
                model=model,
                route=route,
                socket=socket,
                upstream=upstream,
                abort=_aborter(request),
                live=live,
                bound=secret.session if secret is not None else None,
            )
            await session.run(task)
        except Exception:  # the session's own boundary: the socket is a WebSocket now
            log.exception("a realtime session failed")
            with contextlib.suppress(Exception):
                await socket.close(code=1011, message=b"internal error")
        finally:
            svc.in_flight.discard(task)
    return socket


async def _open_upstream(
    svc: Services, stack: contextlib.AsyncExitStack, routes: list[Route], max_event_bytes: int
) -> tuple[aiohttp.ClientWebSocketResponse, Route]:
    """The first of ``routes`` whose upstream opens a session (raises the last failure)."""
    failure: UpstreamError | None = None
    for route in routes:
        try:
            upstream = await stack.enter_async_context(
                realtime_socket(route.target, max_event_bytes)
            )
        except UpstreamError as error:
            log.warning("realtime channel %s failed: %s", route.target.channel, error.message)
            svc.breakers.failed(route, error)
            failure = error
            continue
        svc.breakers.succeeded(route)
        return upstream, route
    assert failure is not None
    raise failure


def _aborter(request: web.Request) -> Callable[[], None]:
    """Cut the caller's connection (a caller that cannot take a close frame)."""
    transport = request.transport

    def abort() -> None:
        if transport is not None:
            transport.abort()

    return abort
