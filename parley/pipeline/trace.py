"""The runner's seam for distributed tracing: a ``Tracer`` it tells when a call starts,
when each upstream attempt starts, and which route answered.

The rest of a call's trace comes from what the pipeline already tells (``CallWatchers``:
failed attempts, a stream's first byte; ``Meter.observers``: the call's record). The
tracer lives here, not in ``telemetry/``, because the pipeline names it and telemetry
imports the pipeline (``tests/unit/test_layers.py``). ``NO_TRACER`` is the default: its
``on`` is false and the runner calls none of its methods, so a gateway without tracing
pays one attribute check per seam. The OpenTelemetry one is
``parley/telemetry/otel.py``, imported only when an OTLP endpoint is configured. What of
a call's prompt and reply a span may carry is the group's content policy's to say: the
tracer reads it from the call's capture (``Call.content``), which exists only for a
group that keeps content.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from parley.pipeline.call import Call
from parley.pipeline.route import Route

A = TypeVar("A")


class Tracer(Protocol):
    @property
    def on(self) -> bool:
        """Whether the runner calls the methods below (false: it calls none)."""
        ...

    def begin(self, call: Call, headers: Mapping[str, str]) -> None:
        """An admitted call starts; ``headers`` are the caller's (its ``traceparent``)."""
        ...

    def attempts(self, call: Call, attempt: Callable[[Route], A]) -> Callable[[Route], A]:
        """``attempt`` (call one route, or open a stream on it), each call of it the start
        of an upstream attempt of ``call`` (the request it sends is the attempt's)."""
        ...

    def answered(self, call: Call, route: Route) -> None:
        """``route`` answered ``call`` (a whole reply, or a stream's first event)."""
        ...


class NoTracer:
    """Tracing off: nothing is traced, and the runner calls nothing (``on`` is false)."""

    on = False

    def begin(self, call: Call, headers: Mapping[str, str]) -> None:
        return None

    def attempts(self, call: Call, attempt: Callable[[Route], A]) -> Callable[[Route], A]:
        return attempt

    def answered(self, call: Call, route: Route) -> None:
        return None


NO_TRACER: Tracer = NoTracer()
