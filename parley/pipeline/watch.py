"""Who is told of the moments of a call that its usage record does not hold.

The meter's record says how a call ended (``Meter.observers``). The runner also tells
``CallWatchers`` when admission refuses a call, when an upstream attempt fails (each
one, fallen over or not) and when a stream's first byte leaves. Telemetry (logs,
metrics) subscribes; the pipeline knows nothing of what is done with it. Every callback
is synchronous and cheap: no I/O, nothing awaited.
"""

from __future__ import annotations

from collections.abc import Callable

from parley.errors import QuotaExceeded, RateLimited, UpstreamError
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.route import Route

Refused = Callable[[Caller, str], None]
"""The caller, and what refused it: ``requests``, ``tokens`` or ``budget``."""
UpstreamFailed = Callable[[Call, Route, UpstreamError, float], None]
"""The call, the route tried (its channel, the model's name upstream), the error and the
attempt's seconds."""
FirstByte = Callable[[Call, float], None]
"""The call, and seconds from its admission to its stream's first byte."""


class CallWatchers:
    __slots__ = ("first_byte", "refused", "upstream_failed")

    def __init__(self) -> None:
        self.refused: list[Refused] = []
        self.upstream_failed: list[UpstreamFailed] = []
        self.first_byte: list[FirstByte] = []

    def tell_refused(self, caller: Caller, decision: str) -> None:
        for watcher in self.refused:
            watcher(caller, decision)

    def tell_refusal(self, caller: Caller, refusal: RateLimited | QuotaExceeded) -> None:
        """``tell_refused`` for admission's error: its rate's kind, or ``budget``."""
        self.tell_refused(caller, refusal.type if isinstance(refusal, RateLimited) else "budget")

    def tell_upstream_failed(
        self, call: Call, route: Route, error: UpstreamError, seconds: float
    ) -> None:
        for watcher in self.upstream_failed:
            watcher(call, route, error, seconds)

    def tell_first_byte(self, call: Call, seconds: float) -> None:
        for watcher in self.first_byte:
            watcher(call, seconds)
