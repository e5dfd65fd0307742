"""A real OTLP/HTTP receiver (an OpenTelemetry collector's front door) for Parley's tests.

It accepts ``POST /v1/traces`` and ``POST /v1/metrics`` with protobuf bodies (gzip or
not), decodes them with the OpenTelemetry protobuf definitions (``opentelemetry-proto``)
and keeps what it received::

    async with OtlpCollector() as collector:
        collector.endpoint     # "http://127.0.0.1:<port>", for telemetry.otlp.endpoint
        collector.spans        # every span received (ReceivedSpan), oldest first
        collector.metrics      # metric name → its data points (attributes, value)

``collector.hold`` (an ``asyncio.Event``, set by default) holds every export until it
is set again: a collector that is slow to answer.
"""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

PROTOBUF = "application/x-protobuf"


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    """``Span.SpanKind``: 2 server, 3 client."""
    attributes: dict[str, Any]
    status: int
    """``Status.StatusCode``: 0 unset, 1 ok, 2 error."""
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]


@dataclass
class OtlpCollector:
    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: dict[str, list[tuple[dict[str, Any], Any]]] = field(default_factory=dict)
    exports: int = 0
    hold: asyncio.Event = field(default_factory=asyncio.Event)
    endpoint: str = ""
    _runner: web.AppRunner | None = None

    async def __aenter__(self) -> OtlpCollector:
        self.hold.set()
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        app.router.add_post("/v1/metrics", self._metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.endpoint = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.hold.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _body(self, request: web.Request) -> bytes:
        assert request.content_type == PROTOBUF, request.content_type
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        await self.hold.wait()
        self.exports += 1
        return body

    async def _traces(self, request: web.Request) -> web.Response:
        export = ExportTraceServiceRequest.FromString(await self._body(request))
        for resource_spans in export.resource_spans:
            resource = attributes_of(resource_spans.resource.attributes)
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        ReceivedSpan(
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            span.kind,
                            attributes_of(span.attributes),
                            span.status.code,
                            [(e.name, attributes_of(e.attributes)) for e in span.events],
                            resource,
                        )
                    )
        reply = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=reply, content_type=PROTOBUF)

    async def _metrics(self, request: web.Request) -> web.Response:
        export = ExportMetricsServiceRequest.FromString(await self._body(request))
        for resource_metrics in export.resource_metrics:
            for scope in resource_metrics.scope_metrics:
                for metric in scope.metrics:
                    points = self.metrics.setdefault(metric.name, [])
                    kind = metric.WhichOneof("data")
                    for point in getattr(metric, kind).data_points:
                        value = (point.count, point.sum) if kind == "histogram" else point
                        points.append((attributes_of(point.attributes), value))
        reply = ExportMetricsServiceResponse().SerializeToString()
        return web.Response(body=reply, content_type=PROTOBUF)

    def named(self, name: str) -> list[ReceivedSpan]:
        return [span for span in self.spans if span.name == name]
