"""Each channel's recent health, kept in memory from the meter's records.

``ChannelHealth.observe`` runs in ``Meter.finish`` on every call, so it is O(1) and
allocates nothing after a channel's first call: a fixed ring of the last ``WINDOW``
outcomes per channel with running sums of errors and latency. The latencies and the
last success's time are kept as machine numbers (``array``), not as the int and float
objects of the last calls: after a burst of streams those sat in the burst's memory and
would keep pymalloc from giving it back. The admin surface reads a
``HealthSnapshot`` per channel. Health is per process: each worker and instance
reports what it saw.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass

from parley.domain.usage import UsageRecord

WINDOW = 200
"""How many recent calls per channel the error rate and latency are taken over."""
ERROR_STATUS = 500
CLIENT_CLOSED = 499
NOT_YET = -1.0
"""``last_ok`` before a first success."""


@dataclass(frozen=True, slots=True)
class HealthSnapshot:
    calls: int
    """Calls in the window (at most ``WINDOW``)."""
    errors: int
    error_rate: float
    mean_latency_ms: float
    p95_latency_ms: int
    last_error_status: int | None
    last_error_at: float | None
    """Wall-clock seconds (``time.time()``) of the last failure."""
    last_ok_at: float | None


class _Ring:
    __slots__ = ("count", "errors", "failed", "index", "last_error", "last_ok", "latencies")

    def __init__(self) -> None:
        self.latencies = array("q", bytes(8 * WINDOW))
        self.failed = [False] * WINDOW
        self.index = 0
        self.count = 0
        self.errors = 0
        self.last_error: tuple[int, float] | None = None
        self.last_ok = array("d", [NOT_YET])

    def add(self, latency_ms: int, failed: bool, status: int) -> None:
        at = self.index
        if self.count == WINDOW:
            self.errors -= self.failed[at]
        else:
            self.count += 1
        self.latencies[at] = latency_ms
        self.failed[at] = failed
        self.errors += failed
        self.index = (at + 1) % WINDOW
        if failed:
            self.last_error = (status, time.time())
        else:
            self.last_ok[0] = time.time()

    def snapshot(self) -> HealthSnapshot:
        seen = sorted(self.latencies[: self.count])
        last = self.last_error
        return HealthSnapshot(
            calls=self.count,
            errors=self.errors,
            error_rate=self.errors / self.count if self.count else 0.0,
            mean_latency_ms=sum(seen) / len(seen) if seen else 0.0,
            p95_latency_ms=seen[min(len(seen) - 1, len(seen) * 95 // 100)] if seen else 0,
            last_error_status=last[0] if last else None,
            last_error_at=last[1] if last else None,
            last_ok_at=None if self.last_ok[0] == NOT_YET else self.last_ok[0],
        )


class ChannelHealth:
    """Recent outcomes per channel name."""

    def __init__(self) -> None:
        self._rings: dict[str, _Ring] = {}

    def observe(self, record: UsageRecord) -> None:
        """One metered call. Calls no channel answered and calls the client abandoned
        say nothing about a channel; a status of 500 or more is the channel's failure."""
        channel = record.channel
        if not channel or record.status == CLIENT_CLOSED:
            return
        ring = self._rings.get(channel)
        if ring is None:
            ring = self._rings[channel] = _Ring()
        ring.add(record.latency_ms, record.status >= ERROR_STATUS, record.status)

    def snapshot(self, channel: str) -> HealthSnapshot | None:
        ring = self._rings.get(channel)
        return None if ring is None else ring.snapshot()
