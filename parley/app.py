"""create_app(settings) → the aiohttp application, its edge and its lifecycle.

Every route's handler is served behind one edge, ``at_the_edge``, which does in order
what every request needs:

* every failure becomes the OpenAI envelope; nothing else reaches a caller;
* a ``/v1`` call to no route is a 404 (405 for a wrong method) before its key is
  read, so a wrong path never reads as a wrong key, nor tells a valid key from another;
* other ``/v1`` calls (and ``/v2/rerank``, Cohere's clients' path) are authenticated
  (stage 1 of the pipeline) and every reply to an authenticated caller carries the
  rate-limit headers;
* a request body still arriving has a deadline, and a key a number of bodies that may be
  arriving at once (``parley.edge.bodies``).

The edge wraps each handler when its route is added, not as an aiohttp middleware: an
application with any middleware (its sub-applications' included) runs aiohttp's
middleware chain for every request, a coroutine and a context switch of the current
application more than the edge itself (docs/performance.md, Speed habits). A request
that no route serves reaches ``unrouted``, the catch-all route added last, which raises
aiohttp's 404 or 405 behind the same edge. One edge rather than one per concern, and no
``on_response_prepare`` hook: each is paid by every call (docs/performance.md). A
failure after a reply has begun ends that reply instead (``parley.pipeline.started``): a
handler that sends its reply's head itself notes it first (``started.note_started``); a
reply begun any other way is cut, never answered a second time. The edge gives every
reply it returns unsent its ``x-request-id`` (a stream puts its call's id in its head
itself).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from functools import partial, wraps

from aiohttp import web
from aiohttp.typedefs import Handler
from aiohttp.web_protocol import RequestPayloadError

from parley.admin.site import admin_app
from parley.api.batch_lane import BATCH_LANE, BatchLane
from parley.api.reply import error_response, http_exception_as_error
from parley.api.routes import api_routes
from parley.edge import bodies as edge_bodies
from parley.edge.bodies import BODY_SECONDS, PENDING_BODIES, BodyTimeout, start_body_clock
from parley.edge.deferred import deferred
from parley.edge.request_log import log_refusal
from parley.edge.routing import behind, catch_all
from parley.errors import (
    INTERNAL_ERROR_MESSAGE,
    InvalidRequest,
    ParleyError,
    RequestTimeout,
    ServiceUnavailable,
)
from parley.limits.headers import rate_limit_headers
from parley.pipeline.admit import scopes_for
from parley.pipeline.authenticate import (
    Caller,
    check_usable,
    identify,
    identify_client_secret,
)
from parley.pipeline.context import CALLER, CLIENT_SECRET, REPLY_HEADERS, SERVICES
from parley.pipeline.services import Services
from parley.pipeline.started import (
    MESSAGES,
    end_started_reply,
    failure_tail,
    started_reply,
)
from parley.settings import Settings
from parley.store.base import Store, StoreFault, StoreUnavailable
from parley.telemetry.request_ids import stamp_request_id
from parley.telemetry.wiring import install as install_telemetry

log = logging.getLogger("parley")
V1 = ("/v1/", "/v2/rerank")
"""The API's paths: ``/v1``, and Cohere's v2 rerank (its clients call ``/v2/rerank``)."""
ANTHROPIC_VERSION = "anthropic-version"
REALTIME = "/v1/realtime"
KEY_SUBPROTOCOL = "openai-insecure-api-key"
"""The WebSocket subprotocol a browser names its key (or client secret) in."""
DATABASE_UNAVAILABLE = "The database is unavailable right now; try again shortly."
BODY_TIMEOUT_MESSAGE = "The request body did not arrive in time; send it whole, faster."
BAD_BODY_MESSAGE = (
    "The request body could not be read: its chunked framing or content encoding is malformed."
)


def at_the_edge(handler: Handler, *, routed: bool = True) -> Handler:
    """``handler`` behind the edge: authentication and limit headers for ``/v1``, body
    bounds, and the envelope; a refusal of a known key is logged
    (``parley.edge.request_log``). ``routed=False`` is the catch-all's edge
    (``parley.edge.routing``): its ``/v1`` requests are refused before their key is read."""

    @wraps(handler)
    async def gateway(request: web.Request) -> web.StreamResponse:
        caller: Caller | None = None
        began = 0.0
        try:
            v1 = request.path.startswith(V1)
            if v1 and routed:
                began = time.monotonic()
                svc = request.app[SERVICES]
                authorization = request.headers.get("Authorization") or _api_key(request)
                caller = await _identified(request, authorization, svc)
                check_usable(caller)
                request[CALLER] = caller
            if request.content.is_eof():  # nearly every call: the body came whole with the head
                response = await handler(request)
            else:
                response = await _with_body_bounds(request, handler)
            if not response.prepared:  # a started stream sent its head already (the runner's)
                if v1:
                    if REPLY_HEADERS not in request:
                        await _peek_limit_headers(request)
                    response.headers.update(request[REPLY_HEADERS])
                stamp_request_id(request, response)
            return response
        except ParleyError as error:
            log_refusal(request, caller, error, began)
            await _limit_headers_for_refusal(request)
            return await _error_reply(request, error)
        except web.HTTPException as exc:
            return await _http_exception_reply(request, exc, caller, began, routed=routed)
        except (StoreUnavailable, StoreFault) as problem:  # billing, admin: the database failed
            return await _store_failed(request, caller, problem, began)
        except BodyTimeout:
            timeout = RequestTimeout(BODY_TIMEOUT_MESSAGE)
            log_refusal(request, caller, timeout, began)
            return await _error_reply(request, timeout)
        except RequestPayloadError:  # bad chunking or content coding, found while reading
            bad_body = InvalidRequest(BAD_BODY_MESSAGE)
            log_refusal(request, caller, bad_body, began)
            return await _error_reply(request, bad_body)
        except Exception:  # the one boundary where anything unexpected becomes a clean 500
            where = " after its reply began" if started_reply(request) is not None else ""
            log.exception("unhandled error on %s %s%s", request.method, request.path, where)
            failure = ParleyError(INTERNAL_ERROR_MESSAGE)
            log_refusal(request, caller, failure, began)
            return await _error_reply(request, failure, logged=True)

    return gateway


async def _store_failed(
    request: web.Request,
    caller: Caller | None,
    problem: StoreUnavailable | StoreFault,
    began: float,
) -> web.StreamResponse:
    """The database away (503, try again shortly) or refusing the query (500: a bug, a
    schema behind the code); either logged in one line with the driver's reason, never
    its statement, parameters or a traceback."""
    failure: ParleyError
    if isinstance(problem, StoreUnavailable):
        failure = ServiceUnavailable(DATABASE_UNAVAILABLE, headers={"retry-after": "1"})
        log.warning("%s %s: %s", request.method, request.path, problem)
    else:
        failure = ParleyError(INTERNAL_ERROR_MESSAGE)
        log.error("%s %s: %s", request.method, request.path, problem)
    log_refusal(request, caller, failure, began)
    await _limit_headers_for_refusal(request)
    return await _error_reply(request, failure, logged=True)


async def _http_exception_reply(
    request: web.Request,
    exc: web.HTTPException,
    caller: Caller | None,
    began: float,
    *,
    routed: bool,
) -> web.StreamResponse:
    """aiohttp's own refusal (no route, wrong method, body too large) as the envelope; a
    redirect goes on as it is, with its ``x-request-id``. A request to no route from an
    Anthropic client (its SDKs send ``anthropic-version`` with every call) is refused in
    Anthropic's shape."""
    if exc.status < 400:
        stamp_request_id(request, exc)
        raise exc
    refused = http_exception_as_error(exc, request.client_max_size)
    log_refusal(request, caller, refused, began)
    anthropic = not routed and ANTHROPIC_VERSION in request.headers
    return await _error_reply(request, refused, anthropic=anthropic)


async def _error_reply(
    request: web.Request, error: ParleyError, *, logged: bool = False, anthropic: bool = False
) -> web.StreamResponse:
    """The envelope; or, once a reply has begun, its end (``parley.pipeline.started``)."""
    started = started_reply(request)
    if started is not None:
        if not logged:
            log.warning(
                "%s %s failed after its reply began: %s",
                request.method,
                request.path,
                error.message,
            )
        started.force_close()  # a failure that escaped its job: the connection's state is unknown
        await end_started_reply(request, started, failure_tail(request, started, error))
        return started
    if request.writer.output_size:  # begun without ``note_started``: cut, never twice
        log.warning("%s %s failed after an unnoted reply began", request.method, request.path)
        if request.transport is not None:
            request.transport.close()
        return web.StreamResponse()  # never sent: its connection is closed
    anthropic = anthropic or request.path.startswith(MESSAGES)
    response = error_response(error, request.get(REPLY_HEADERS), anthropic=anthropic)
    stamp_request_id(request, response)
    if not request.content.is_eof():  # the body is still arriving: close, do not keep reading
        response.force_close()
    return response


def _api_key(request: web.Request) -> str | None:
    """On the Messages API, a request without ``Authorization`` may carry its key in
    ``x-api-key`` (Anthropic's SDKs send either); a realtime session, in the WebSocket
    subprotocol ``openai-insecure-api-key.<key>`` (browsers can set no header): either
    as a Bearer credential."""
    if request.path.startswith(MESSAGES):
        api_key = request.headers.get("x-api-key")
        if api_key:
            return f"Bearer {api_key}"
    elif request.path == REALTIME:
        for offered in request.headers.get("Sec-WebSocket-Protocol", "").split(","):
            name, dot, key = offered.strip().partition(".")
            if dot and name == KEY_SUBPROTOCOL and key:
                return f"Bearer {key}"
    return None


async def _identified(request: web.Request, authorization: str | None, svc: Services) -> Caller:
    """The caller the credential names: a key's, or on ``/v1/realtime`` a client secret's
    (kept on the request: the session is bound to what it was made for)."""
    if request.path == REALTIME:
        found = await identify_client_secret(authorization, svc.client_secrets, svc.directory)
        if found is not None:
            caller, request[CLIENT_SECRET] = found
            return caller
    return await identify(authorization, svc.directory)


async def _with_body_bounds(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A deadline for the body, and a per-key slot while it arrives (``parley.edge.bodies``)."""
    body = request.content
    start_body_clock(body, request.config_dict[BODY_SECONDS])
    caller = request.get(CALLER)
    if caller is None:
        return await handler(request)
    with request.config_dict[PENDING_BODIES].hold(caller.key.id, body):
        return await handler(request)


async def _limit_headers_for_refusal(request: web.Request) -> None:
    """An authenticated call refused before admission reports the limits as they stand."""
    if CALLER in request and REPLY_HEADERS not in request:
        await _peek_limit_headers(request)


async def _peek_limit_headers(request: web.Request) -> None:
    """Calls that did not pass admission report the limits as they stand."""
    svc = request.app[SERVICES]
    try:
        decision = await svc.limiter.peek(scopes_for(request[CALLER]))
    except ParleyError:  # limits unavailable (Redis down, `reject`): the reply goes without
        request[REPLY_HEADERS] = {}
        return
    request[REPLY_HEADERS] = rate_limit_headers(decision)


def create_app(settings: Settings, *, store: Store | None = None) -> web.Application:
    app = web.Application(client_max_size=settings.server.max_body_bytes)
    edge_bodies.install(
        app, settings.server.body_timeout_seconds, settings.server.pending_bodies_per_key
    )
    app.router.add_routes(behind(at_the_edge, api_routes(deferred)))
    app.add_subapp("/admin", admin_app(settings, at_the_edge))
    app.router.add_get("/health", at_the_edge(health))
    app.router.add_get("/openapi.json", at_the_edge(deferred("parley.openapi:openapi_json")))

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        svc = app[SERVICES] = await Services.start(settings, store=store)
        lane = app[BATCH_LANE] = BatchLane(svc)
        lane.start()
        yield
        await lane.close(settings.server.shutdown_close_seconds / 2)
        await svc.close()

    app.cleanup_ctx.append(lifecycle)
    app.on_shutdown.append(_stop_batch_lane)  # no new batch line once shutdown begins
    install_telemetry(app, settings, at_the_edge)  # CORS, /metrics (after the services)
    catch_all(app.router, partial(at_the_edge, routed=False))
    return app


async def _stop_batch_lane(app: web.Application) -> None:
    lane = app.get(BATCH_LANE)
    if lane is not None:
        await lane.stop()


async def health(request: web.Request) -> web.Response:
    svc = request.app[SERVICES]
    return web.json_response({"status": "ok", "usage_backlog": svc.meter.writer.backlog})
