"""Attach telemetry to the app: CORS, ``/metrics`` and its sources (the request id is
stamped by the gateway's edge, ``parley/app.py``).

``create_app`` calls ``install`` once. The metrics object is built with the app and
connected to the services when they start (the meter's records, the usage writer's
batches); a small task samples the gauges once a second for the other workers' sake.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Handler

from parley.api.batch_lane import BATCH_LANE, BatchLane
from parley.domain.keys import digest, same_digest
from parley.domain.usage import UsageRecord
from parley.errors import AuthenticationFailed, UpstreamError
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import SERVICES
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.pipeline.trace import NO_TRACER
from parley.pipeline.watch import CallWatchers
from parley.runtime.breaker import Breakers
from parley.runtime.circuit import Transition
from parley.settings import MetricsSettings, OtlpSettings, Settings
from parley.telemetry import cors
from parley.telemetry.access import ACCESS_RECORDS, AccessRecords
from parley.telemetry.metrics import CONTENT_TYPE, GatewayMetrics
from parley.telemetry.upstream import UpstreamFailureLog, upstream_status

METRICS = web.AppKey("metrics", GatewayMetrics)
SAMPLE_SECONDS = 1.0


def install(app: web.Application, settings: Settings, edge: Callable[[Handler], Handler]) -> None:
    """Telemetry for ``app``; ``/metrics`` is served behind ``edge``, as every route."""
    app.on_startup.append(_log_upstream_failures)
    cors.install(app, settings.server.cors)
    if settings.server.access_log:
        _install_access_records(app)
    if settings.metrics.enabled:
        _install_metrics(app, settings.metrics, edge)
    if settings.telemetry.otlp.endpoint is not None:
        _install_tracing(app, settings.telemetry.otlp)


def _install_metrics(
    app: web.Application, settings: MetricsSettings, edge: Callable[[Handler], Handler]
) -> None:
    metrics = GatewayMetrics(multiprocess_dir=settings.multiprocess_dir)
    app[METRICS] = metrics
    app.router.add_get("/metrics", edge(_scrape_handler(settings.token)))

    async def connected(app: web.Application) -> AsyncIterator[None]:
        svc = app[SERVICES]
        svc.meter.observers.append(_metered(metrics))
        svc.meter.writer.on_batch = metrics.batch_written
        _watch(svc.watchers, metrics)
        _watch_breakers(svc.breakers, metrics)
        lane = app.get(BATCH_LANE)
        sampler = asyncio.create_task(_sample_forever(metrics, svc, lane), name="parley-metrics")
        yield
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler

    app.cleanup_ctx.append(connected)  # after the services' own context: they exist


def _install_tracing(app: web.Application, settings: OtlpSettings) -> None:
    """OpenTelemetry spans (and metrics) over OTLP: imported here, only when configured.
    The tracer starts with the services (after ``/metrics``, whose counter it feeds) and
    is flushed and stopped off the event loop when they end."""

    async def traced(app: web.Application) -> AsyncIterator[None]:
        from parley.telemetry.otel import OtelTracer, traceparent_line

        metrics = app.get(METRICS)
        tracer = OtelTracer(settings, metrics.spans_lost if metrics else _uncounted)
        svc = app[SERVICES]
        svc.tracer = tracer
        svc.http.extra_head = traceparent_line
        svc.watchers.upstream_failed.append(tracer.upstream_failed)
        svc.watchers.first_byte.append(tracer.first_byte)
        svc.meter.observers.append(tracer.finished)
        yield
        svc.tracer = NO_TRACER
        svc.http.extra_head = None
        # The spans of calls whose content is kept end once it is written: write it now,
        # while the exporter still runs (the database's own timeouts bound the wait).
        await svc.contents.flush()
        await tracer.stop()

    app.cleanup_ctx.append(traced)


def _uncounted(reason: str, count: int) -> None:
    return None


def _install_access_records(app: web.Application) -> None:
    records = AccessRecords()
    app[ACCESS_RECORDS] = records

    async def connected(app: web.Application) -> None:
        app[SERVICES].meter.observers.append(records.observe)

    app.on_startup.append(connected)  # after the services' own context: they exist


async def _log_upstream_failures(app: web.Application) -> None:
    app[SERVICES].watchers.upstream_failed.append(UpstreamFailureLog())


def _watch(watchers: CallWatchers, metrics: GatewayMetrics) -> None:
    def refused(caller: Caller, decision: str) -> None:
        metrics.refused(decision)

    def upstream_failed(call: Call, route: Route, error: UpstreamError, seconds: float) -> None:
        metrics.upstream_failed(route.target.channel, upstream_status(error), type(error).__name__)

    def first_byte(call: Call, seconds: float) -> None:
        metrics.stream_started(call.model.spec.name, seconds)

    watchers.refused.append(refused)
    watchers.upstream_failed.append(upstream_failed)
    watchers.first_byte.append(first_byte)


def _watch_breakers(breakers: Breakers, metrics: GatewayMetrics) -> None:
    """Every breaker's state from the start (closed), then each transition."""
    for channel, model, state in breakers.states():
        metrics.channel_state.labels(channel, model).set(state)

    def moved(change: Transition) -> None:
        metrics.breaker_moved(change.channel, change.model, change.state, change.state.name.lower())

    breakers.transitions.append(moved)


def _metered(metrics: GatewayMetrics) -> Callable[[Call, UsageRecord], None]:
    def observe(call: Call, record: UsageRecord) -> None:
        metrics.finished(call.caller.group.name, record)

    return observe


async def _sample_forever(metrics: GatewayMetrics, svc: Services, lane: BatchLane | None) -> None:
    while True:
        _sample(metrics, svc, lane)
        await asyncio.sleep(SAMPLE_SECONDS)


def _sample(metrics: GatewayMetrics, svc: Services, lane: BatchLane | None) -> None:
    writer = svc.meter.writer
    metrics.sample(writer.backlog, svc.directory.loaded_at, writer.refusals_dropped)
    contents = svc.contents
    metrics.content(contents.backlog, contents.written, contents.dropped)
    budget = svc.planner.budget
    metrics.routed(budget.granted, budget.refused, svc.planner.fallbacks)
    deletions = svc.deletions
    if deletions is not None:
        metrics.clone_deletions(deletions.deleted, deletions.failed, deletions.pending)
    if lane is not None:
        metrics.batch_lane(lane.in_flight_by_channel(), lane.share.shares(), lane.queued)
    metrics.live_sessions(svc.live_sessions.by_model())


def _scrape_handler(token: str | None) -> Callable[[web.Request], Awaitable[web.Response]]:
    expected = digest(token) if token else None

    async def scrape(request: web.Request) -> web.Response:
        if expected is not None:
            given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if not same_digest(digest(given), expected):
                raise AuthenticationFailed("A valid metrics token is required for /metrics.")
        metrics = request.app[METRICS]
        _sample(metrics, request.app[SERVICES], request.app.get(BATCH_LANE))
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})

    return scrape
