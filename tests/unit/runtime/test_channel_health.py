"""Per-channel health from the meter's records: a fixed window, errors counted in and
out as the window turns, calls without a channel or abandoned by the client ignored."""

from __future__ import annotations

import sys
from dataclasses import replace

from parley.domain.usage import UsageRecord
from parley.runtime.health import WINDOW, ChannelHealth
from tests.records import usage_record


def record(status: int, latency: int = 10, channel: str = "a") -> UsageRecord:
    return replace(usage_record("r"), status=status, latency_ms=latency, channel=channel)


def test_error_rate_and_latency_over_the_window() -> None:
    health = ChannelHealth()
    for latency in range(1, 21):
        health.observe(record(200, latency))
    health.observe(record(502, 100))
    snap = health.snapshot("a")
    assert snap is not None
    assert (snap.calls, snap.errors) == (21, 1)
    assert abs(snap.error_rate - 1 / 21) < 1e-9
    assert snap.p95_latency_ms == 20 and snap.last_error_status == 502
    assert snap.last_error_at is not None and snap.last_ok_at is not None
    assert health.snapshot("b") is None


def test_old_errors_leave_the_window() -> None:
    health = ChannelHealth()
    for _ in range(3):
        health.observe(record(504))
    for _ in range(WINDOW):
        health.observe(record(200))
    snap = health.snapshot("a")
    assert snap is not None and (snap.calls, snap.errors, snap.error_rate) == (WINDOW, 0, 0.0)
    assert snap.last_error_status == 504  # still reported as the last error seen


def test_unrouted_and_abandoned_calls_say_nothing_about_a_channel() -> None:
    health = ChannelHealth()
    health.observe(record(503, channel=""))
    health.observe(record(499))
    health.observe(record(400))  # the caller's mistake
    snap = health.snapshot("a")
    assert health.snapshot("") is None
    assert snap is not None and (snap.calls, snap.errors) == (1, 0)


def test_the_ring_keeps_no_object_of_the_calls() -> None:
    """A ring holding the last calls' int and float objects kept a burst's memory pinned
    (pymalloc frees an arena only when nothing in it is alive): it keeps their values."""
    health = ChannelHealth()
    health.observe(record(200, 1))  # the channel's ring is made
    latency = int("123456789")  # an int of its own (not a cached small one)
    held = sys.getrefcount(latency)
    last = record(200, latency)
    held_by_record = sys.getrefcount(latency) - held
    health.observe(last)
    assert sys.getrefcount(latency) == held + held_by_record
    snap = health.snapshot("a")
    assert snap is not None and snap.p95_latency_ms == 123456789 and snap.last_ok_at
