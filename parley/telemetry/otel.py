"""OpenTelemetry GenAI traces (and, optionally, metrics) exported over OTLP/HTTP.

Imported only when ``telemetry.otlp.endpoint`` is set (``telemetry/wiring.py``): a
gateway without it loads nothing of OpenTelemetry. It needs the ``otel`` extra.

**Spans.** Each admitted call is a ``SERVER`` span named ``{operation} {model}``
(``chat chat-large``), the child of the caller's W3C ``traceparent`` when it sent one.
Each upstream attempt is a ``CLIENT`` child span of it, named ``{operation} {upstream
model}``, from the request until the upstream answered (a whole reply, or a stream's
first event) or failed: a call that fell over has one attempt span per route tried. Each
attempt's request carries a ``traceparent`` naming the attempt's span (the HTTP client's
``extra_head`` hook, read from a context variable the attempt sets). Attributes follow
the OpenTelemetry GenAI semantic conventions (``gen_ai.*``, ``server.*``, ``error.type``)
plus Parley's (``parley.*``); never a key or a channel's credentials, and a prompt or a
reply only as the group's content policy allows (below).

**Content.** A call of a group whose content policy keeps text (``redacted`` or
``full``, ``domain/content.py``) carries ``parley.content.request`` and
``parley.content.reply``: the very text the content log keeps (cut at
``content.max_bytes``, masked for ``redacted``), and ``parley.content.policy``. That text
is prepared in the content log's thread, so such a call's span ends (at the time the
call ended) once its content is ready, about ``content.flush_seconds`` later; a capture
the content log dropped ends the span without it. No other group's span ever has it.

**Off the event loop.** Ended spans go to the SDK's ``BatchSpanProcessor``, whose
thread exports them in batches; its queue is bounded (``max_queue_size``), so a slow or
unreachable collector costs a call nothing: a span that finds the queue full is dropped,
and so is a batch whose export failed, both counted (``dropped``, shown on
``/metrics`` as ``parley_otel_spans_dropped_total``). Sampling is parent-based: a
caller's sampled flag decides; a call without one is sampled at ``sample_ratio``.

**Metrics** (``telemetry.otlp.metrics``): ``gen_ai.client.token.usage`` (by
``gen_ai.token.type``), ``gen_ai.client.operation.duration`` and
``gen_ai.server.time_to_first_token`` histograms, exported by the SDK's periodic reader
in its own thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from parley.domain.usage import UsageRecord
from parley.errors import UpstreamError
from parley.pipeline.call import Call
from parley.pipeline.route import Route
from parley.runtime.content_capture import PreparedContent
from parley.runtime_settings import OtlpSettings
from parley.telemetry.upstream import upstream_status

A = TypeVar("A")
Dropped = Callable[[str, int], None]
"""Told of spans lost: the reason (``queue_full``, ``export_failed``) and how many."""

OPERATIONS = {
    "/v1/chat/completions": "chat",
    "/v1/messages": "chat",
    "/v1/responses": "chat",
    "/v1/completions": "text_completion",
    "/v1/embeddings": "embeddings",
}
"""``gen_ai.operation.name`` of the endpoints the conventions name; any other endpoint's
is its path after ``/v1/``, dotted (``audio.speech``, ``rerank``)."""
PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure-openai": "azure.ai.openai",
    "bedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "cohere": "cohere",
}
"""``gen_ai.provider.name`` of a channel type the conventions name; any other type is
its own name (``deepgram``, ``jina``)."""
TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
SECONDS_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48]
NANOS_PER_UNIT = 1_000_000_000
STOP_SECONDS = 2.0
"""The longest a gateway's shutdown waits for its last spans to be exported."""

_traceparent: contextvars.ContextVar[bytes] = contextvars.ContextVar(
    "parley_traceparent", default=b""
)
"""The running attempt's ``traceparent`` header line (empty between attempts)."""


def traceparent_line() -> bytes:
    """``HttpClient.extra_head``: the running attempt's ``traceparent`` line, if any."""
    return _traceparent.get()


def operation_name(endpoint: str) -> str:
    name = OPERATIONS.get(endpoint)
    return name if name is not None else endpoint.removeprefix("/v1/").replace("/", ".")


def provider_name(channel_type: str) -> str:
    return PROVIDERS.get(channel_type, channel_type)


class _Server:
    """``server.address`` and ``server.port`` of channel base URLs, each parsed once."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, int]] = {}

    def __call__(self, base_url: str) -> tuple[str, int]:
        found = self._known.get(base_url)
        if found is None:
            parts = urlsplit(base_url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            found = self._known[base_url] = (parts.hostname or "", port)
        return found


class _CallSpans:
    """One call's span, its running attempt's span, and what the record will not say."""

    __slots__ = ("attempt", "attempt_route", "attempts", "operation", "route", "span")

    def __init__(self, span: Span, operation: str) -> None:
        self.span = span
        self.operation = operation
        self.attempt: Span | None = None
        self.attempt_route: Route | None = None
        self.attempts = 0
        self.route: Route | None = None
        """The route that answered."""

    def end_attempt(self, outcome: str, error: UpstreamError | None = None) -> None:
        attempt = self.attempt
        if attempt is None:
            return
        self.attempt = None
        _traceparent.set(b"")
        attempt.set_attribute("parley.outcome", outcome)
        if error is not None:
            attempt.set_attribute("error.type", type(error).__name__)
            attempt.set_attribute("parley.upstream_status", upstream_status(error))
            attempt.set_status(Status(StatusCode.ERROR, error.code or type(error).__name__))
        attempt.end()


class CountingExporter(SpanExporter):
    """The OTLP exporter, counting the spans of every batch it failed to export, and
    those handed to it (which the queue-full count needs)."""

    def __init__(self, exporter: SpanExporter, dropped: Dropped) -> None:
        self._exporter = exporter
        self._dropped = dropped
        self.taken = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.taken += len(spans)
        result = self._exporter.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self._dropped("export_failed", len(spans))
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


class CountingBatchProcessor(BatchSpanProcessor):
    """``BatchSpanProcessor`` counting the spans it drops for a full queue: those ended
    while ``max_queue_size`` spans wait (queued, and not yet taken by the exporter)."""

    def __init__(
        self,
        exporter: CountingExporter,
        dropped: Dropped,
        *,
        max_queue_size: int,
        **batching: float,
    ) -> None:
        super().__init__(exporter, max_queue_size=max_queue_size, **batching)  # type: ignore[arg-type]
        self._counting = exporter
        self._dropped = dropped
        self._capacity = max_queue_size
        self._queued = 0
        self._lost = 0
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            with self._lock:
                waiting = self._queued - self._lost - self._counting.taken
                full = waiting >= self._capacity
                self._queued += 1
                if full:
                    self._lost += 1
            if full:
                self._dropped("queue_full", 1)
        super().on_end(span)


class OtelTracer:
    """The ``Tracer`` (``pipeline/trace.py``) that makes OpenTelemetry spans, also told of
    failed attempts and first bytes (``CallWatchers``) and of each call's record
    (``Meter.observers``), which ends the call's span."""

    on = True

    def __init__(self, settings: OtlpSettings, dropped: Dropped) -> None:
        endpoint = settings.endpoint
        assert endpoint is not None
        resource = Resource.create({"service.name": settings.service_name})
        self._provider = TracerProvider(
            resource=resource, sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio))
        )
        exporter = CountingExporter(
            OTLPSpanExporter(
                endpoint=f"{endpoint}/v1/traces",
                headers=settings.headers,
                timeout=settings.timeout_seconds,
            ),
            dropped,
        )
        self._processor = CountingBatchProcessor(
            exporter,
            dropped,
            max_queue_size=settings.max_queue_size,
            schedule_delay_millis=settings.schedule_delay_seconds * 1000,
            max_export_batch_size=min(settings.max_export_batch_size, settings.max_queue_size),
        )
        self._provider.add_span_processor(self._processor)
        self._tracer = self._provider.get_tracer("parley")
        self._propagator = TraceContextTextMapPropagator()
        self._calls: dict[str, _CallSpans] = {}
        self._server = _Server()
        self._metrics = _GenAiMetrics(settings, resource) if settings.metrics else None

    # -- the runner's seam (``Tracer``) --

    def begin(self, call: Call, headers: Mapping[str, str]) -> None:
        operation = operation_name(call.endpoint)
        model = call.model.spec.name
        started = time.time_ns() - int(call.age() * NANOS_PER_UNIT)
        span = self._tracer.start_span(
            f"{operation} {model}",
            context=self._propagator.extract(headers),
            kind=SpanKind.SERVER,
            start_time=started,
            attributes={
                "gen_ai.operation.name": operation,
                "gen_ai.request.model": call.model.requested or model,
                "parley.model": model,
                "parley.group": call.caller.group.name,
                "parley.request_id": call.request_id,
                "url.path": call.endpoint,
            },
        )
        self._calls[call.request_id] = _CallSpans(span, operation)

    def attempts(self, call: Call, attempt: Callable[[Route], A]) -> Callable[[Route], A]:
        spans = self._calls.get(call.request_id)
        if spans is None:
            return attempt

        def traced(route: Route) -> A:
            self._start_attempt(spans, route)
            return attempt(route)

        return traced

    def answered(self, call: Call, route: Route) -> None:
        spans = self._calls.get(call.request_id)
        if spans is None:
            return
        spans.route = route
        if spans.attempt is not None:
            spans.attempt.set_attribute("gen_ai.response.model", route.target.model)
        spans.end_attempt("answered")

    # -- the watchers' and the meter's --

    def upstream_failed(
        self, call: Call, route: Route, error: UpstreamError, seconds: float
    ) -> None:
        spans = self._calls.get(call.request_id)
        if spans is None:
            return
        if spans.attempt is not None and spans.attempt_route is route:
            spans.end_attempt("failed", error)
        else:  # a stream cut after it started: its attempt span had ended
            spans.span.add_event(
                "parley.upstream_cut",
                {"parley.channel": route.target.channel, "error.type": type(error).__name__},
            )

    def first_byte(self, call: Call, seconds: float) -> None:
        spans = self._calls.get(call.request_id)
        if spans is None:
            return
        spans.span.set_attribute("parley.time_to_first_token", seconds)
        if self._metrics is not None:
            self._metrics.first_token(spans, call, seconds)

    def finished(self, call: Call, record: UsageRecord) -> None:
        """The call's record: the last of its attributes, and the end of its span."""
        spans = self._calls.pop(call.request_id, None)
        if spans is None:
            return
        spans.end_attempt("abandoned")  # the call ended while an attempt was running
        span = spans.span
        route = spans.route
        attributes: dict[str, AttributeValue] = {
            "parley.channel": record.channel,
            "parley.cost": record.cost_nanos / NANOS_PER_UNIT,
            "parley.attempts": spans.attempts,
            "http.response.status_code": record.status,
        }
        if record.prompt_tokens or record.completion_tokens:
            attributes["gen_ai.usage.input_tokens"] = record.prompt_tokens
            attributes["gen_ai.usage.output_tokens"] = record.completion_tokens
        if call.finish_reasons:
            attributes["gen_ai.response.finish_reasons"] = list(call.finish_reasons)
        if route is not None:
            address, port = self._server(route.target.base_url)
            attributes["gen_ai.provider.name"] = provider_name(route.provider_type)
            attributes["gen_ai.response.model"] = route.target.model
            attributes["server.address"] = address
            attributes["server.port"] = port
        if record.status >= 400:
            attributes["error.type"] = record.error_code or str(record.status)
            span.set_status(Status(StatusCode.ERROR, record.error_code or str(record.status)))
        span.set_attributes(attributes)
        capture = call.content
        if (
            capture is not None
            and capture.queued
            and capture.logging.keeps_text
            and span.is_recording()
        ):
            ended = time.time_ns()
            capture.listeners.append(lambda prepared: _end_with_content(span, prepared, ended))
        else:
            span.end()
        if self._metrics is not None:
            self._metrics.finished(spans, call, record)

    def flush(self) -> None:
        """Export every ended span (and the metrics) now; blocking, as ``shutdown``."""
        self._provider.force_flush()
        if self._metrics is not None:
            self._metrics.flush()

    def shutdown(self) -> None:
        """Flush what is queued (each export within its timeout) and stop the threads;
        blocking (``stop`` runs it off the event loop)."""
        self._provider.shutdown()
        if self._metrics is not None:
            self._metrics.shutdown()

    async def stop(self) -> None:
        """``shutdown`` in a daemon thread, waited for at most ``STOP_SECONDS``: the last
        spans leave if the collector takes them soon, and a collector that is down delays
        neither the services' own shutdown (the usage records) nor the process's exit."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def stop() -> None:
            try:
                self.shutdown()
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(_settle, done)

        threading.Thread(target=stop, name="parley-otel-stop", daemon=True).start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done, STOP_SECONDS)

    def _start_attempt(self, spans: _CallSpans, route: Route) -> None:
        spans.end_attempt("abandoned")
        spans.attempts += 1
        address, port = self._server(route.target.base_url)
        attempt = self._tracer.start_span(
            f"{spans.operation} {route.target.model}",
            context=trace.set_span_in_context(spans.span),
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": spans.operation,
                "gen_ai.provider.name": provider_name(route.provider_type),
                "gen_ai.request.model": route.target.model,
                "server.address": address,
                "server.port": port,
                "parley.channel": route.target.channel,
                "parley.attempt": spans.attempts,
            },
        )
        spans.attempt, spans.attempt_route = attempt, route
        context = attempt.get_span_context()
        _traceparent.set(
            b"traceparent: 00-%032x-%016x-%02x\r\n"
            % (context.trace_id, context.span_id, int(context.trace_flags))
        )


def _end_with_content(span: Span, prepared: PreparedContent | None, ended: int) -> None:
    """End a call's span at ``ended``, with its content when the content log kept it."""
    if prepared is not None:
        attributes: dict[str, AttributeValue] = {"parley.content.policy": prepared.policy}
        if prepared.request_text is not None:
            attributes["parley.content.request"] = prepared.request_text
        if prepared.reply_text is not None:
            attributes["parley.content.reply"] = prepared.reply_text
        span.set_attributes(attributes)
    span.end(end_time=ended)


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


class _GenAiMetrics:
    """The GenAI client metrics, exported over OTLP by the SDK's periodic reader."""

    def __init__(self, settings: OtlpSettings, resource: Resource) -> None:
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(
                endpoint=f"{settings.endpoint}/v1/metrics",
                headers=settings.headers,
                timeout=settings.timeout_seconds,
            ),
            export_interval_millis=settings.metrics_interval_seconds * 1000,
            export_timeout_millis=settings.timeout_seconds * 1000,
        )
        self._provider = MeterProvider(resource=resource, metric_readers=[reader])
        meter = self._provider.get_meter("parley")
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens used per call, by gen_ai.token.type (input, output)",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Seconds from a call's admission to its end",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )
        self._first_token = meter.create_histogram(
            "gen_ai.server.time_to_first_token",
            unit="s",
            description="Seconds from a stream's admission to its first relayed byte",
            explicit_bucket_boundaries_advisory=SECONDS_BUCKETS,
        )

    def _attributes(self, spans: _CallSpans, call: Call) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": spans.operation,
            "gen_ai.request.model": call.model.spec.name,
            "parley.group": call.caller.group.name,
        }
        route = spans.route
        if route is not None:
            attributes["gen_ai.provider.name"] = provider_name(route.provider_type)
            attributes["gen_ai.response.model"] = route.target.model
        return attributes

    def first_token(self, spans: _CallSpans, call: Call, seconds: float) -> None:
        self._first_token.record(seconds, self._attributes(spans, call))

    def finished(self, spans: _CallSpans, call: Call, record: UsageRecord) -> None:
        attributes = self._attributes(spans, call)
        if record.status >= 400:
            attributes["error.type"] = record.error_code or str(record.status)
        self._duration.record(record.latency_ms / 1000, attributes)
        if record.prompt_tokens or record.completion_tokens:
            self._tokens.record(record.prompt_tokens, {**attributes, "gen_ai.token.type": "input"})
            self._tokens.record(
                record.completion_tokens, {**attributes, "gen_ai.token.type": "output"}
            )

    def flush(self) -> None:
        self._provider.force_flush()

    def shutdown(self) -> None:
        self._provider.shutdown()
