"""The batch lane's share of a channel: halved when the channel's interactive calls are
answered 429 or slow down, grown back a line at a time when they don't, deaf to the
batch lines' own calls."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from parley.api.batch_share import LaneShare
from parley.errors import UpstreamRefused
from tests.records import usage_record


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def answered(request_id: str = "req_1", status: int = 200, ms: int = 100) -> Any:
    return replace(usage_record(request_id), status=status, latency_ms=ms)


def share(clock: Clock) -> LaneShare:
    return LaneShare(8, grow_seconds=5, slowdown=0.5, clock=clock)


CALL: Any = SimpleNamespace(request_id="req_1")
BATCH_CALL: Any = SimpleNamespace(request_id="batch_req_0123_4")
ROUTE: Any = SimpleNamespace(target=SimpleNamespace(channel="engine"))


def too_many() -> UpstreamRefused:
    return UpstreamRefused("busy", upstream_status=429, retryable=True)


def test_the_share_starts_at_one_line_and_grows_a_line_at_a_time() -> None:
    clock = Clock()
    lane = share(clock)
    assert lane.limit("engine") == 1  # a channel it has heard nothing of yet
    clock.now += 4.9
    assert lane.limit("engine") == 1
    clock.now += 0.1
    assert lane.limit("engine") == 2
    clock.now += 30
    assert lane.limit("engine") == 8
    clock.now += 100
    assert lane.limit("engine") == 8  # never past per_channel
    assert lane.shares() == {"engine": 8}
    assert lane.limit("") == 8  # lines no channel serves fail at once: no share


def test_a_429_halves_the_share_and_growth_slows_past_what_the_channel_bore() -> None:
    clock = Clock()
    lane = share(clock)
    assert lane.limit("engine") == 1
    clock.now += 35
    lane.upstream_failed(CALL, ROUTE, too_many(), 0.1)
    assert lane.limit("engine") == 4
    lane.upstream_failed(CALL, ROUTE, too_many(), 0.1)  # within the cooldown: one signal
    assert lane.limit("engine") == 4
    clock.now += 2
    lane.upstream_failed(CALL, ROUTE, too_many(), 0.1)  # an attempt, fallen over or not
    assert lane.limit("engine") == 2  # the channel bore 3 lines at most
    clock.now += 5
    assert lane.limit("engine") == 3
    clock.now += 25
    assert lane.limit("engine") == 3  # past what it bore: one line every 30 s
    clock.now += 5
    assert lane.limit("engine") == 4
    for _ in range(3):
        clock.now += 2
        lane.upstream_failed(CALL, ROUTE, too_many(), 0.1)
    assert lane.limit("engine") == 0  # nothing left for batch lines
    clock.now += 5
    assert lane.limit("engine") == 1


def test_a_slowdown_of_interactive_calls_shrinks_the_share() -> None:
    clock = Clock()
    lane = share(clock)
    assert lane.limit("engine") == 1
    clock.now += 35
    for _ in range(20):
        lane.observe(CALL, answered(ms=100))
        clock.now += 0.1
    assert lane.limit("engine") == 8  # steady: no signal
    lane.observe(CALL, answered(ms=130))  # a little slower: noise
    assert lane.limit("engine") == 8
    for _ in range(3):
        lane.observe(CALL, answered(ms=400))
    assert lane.limit("engine") == 4


def test_a_lasting_latency_becomes_the_channels_normal() -> None:
    clock = Clock()
    lane = share(clock)
    lane.observe(CALL, answered(ms=100))
    clock.now += 120  # a minute and more later, the channel is slower for good
    for _ in range(5):
        clock.now += 30
        lane.observe(CALL, answered(ms=300))
    clock.now += 35
    assert lane.limit("engine") == 8  # never taken for a slowdown after the first


def test_batch_lines_own_calls_say_nothing() -> None:
    clock = Clock()
    lane = share(clock)
    assert lane.limit("engine") == 1
    clock.now += 35
    assert lane.limit("engine") == 8
    lane.observe(BATCH_CALL, answered("batch_req_0123_4", status=429))
    lane.upstream_failed(BATCH_CALL, ROUTE, too_many(), 0.1)
    for ms in (100, 100, 900, 900, 900):
        lane.observe(BATCH_CALL, answered("batch_req_0123_4", ms=ms))
    assert lane.limit("engine") == 8
    down = UpstreamRefused("down", upstream_status=500, retryable=True)
    lane.upstream_failed(CALL, ROUTE, down, 0.1)  # a failure is the breakers' to judge
    lane.observe(CALL, answered(ms=100))
    lane.observe(CALL, answered(status=502, ms=5000))  # nor is a failed call slow
    assert lane.limit("engine") == 8


def test_a_fixed_share_is_per_channel_whatever_happens() -> None:
    clock = Clock()
    lane = LaneShare(8, grow_seconds=5, slowdown=0.5, clock=clock, adaptive=False)
    assert lane.limit("engine") == 8
    lane.upstream_failed(CALL, ROUTE, too_many(), 0.1)
    assert lane.limit("engine") == 8
