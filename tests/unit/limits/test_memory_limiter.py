"""MemoryLimiter over time, with a clock the tests move by hand."""

from __future__ import annotations

import pytest

from parley.domain.groups import Quota
from parley.limits.base import Scope
from parley.limits.memory import MemoryLimiter


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def limiter(clock: FakeClock) -> MemoryLimiter:
    return MemoryLimiter(clock=clock, sweep_seconds=60.0)


def scope(name: str, rpm: int | None = None, tpm: int | None = None) -> Scope:
    return Scope(name, Quota(rpm=rpm, tpm=tpm))


async def test_requests_refill_continuously(limiter: MemoryLimiter, clock: FakeClock) -> None:
    group = scope("g:1", rpm=3)
    for _ in range(3):
        await limiter.acquire([group], 0)
    refused = await limiter.acquire([group], 0)
    assert refused.retry_after_seconds == pytest.approx(20.0)
    clock.advance(19.9)
    assert not (await limiter.acquire([group], 0)).allowed
    clock.advance(0.1)
    allowed = await limiter.acquire([group], 0)
    assert allowed.allowed
    assert allowed.requests is not None
    assert allowed.requests.remaining == 0


async def test_retry_after_shrinks_as_time_passes(limiter: MemoryLimiter, clock: FakeClock) -> None:
    group = scope("g:1", tpm=60)
    await limiter.acquire([group], 60)
    assert (await limiter.acquire([group], 30)).retry_after_seconds == pytest.approx(30.0)
    clock.advance(10)
    assert (await limiter.acquire([group], 30)).retry_after_seconds == pytest.approx(20.0)


async def test_reset_shrinks_until_the_bucket_is_full(
    limiter: MemoryLimiter, clock: FakeClock
) -> None:
    group = scope("g:1", rpm=3, tpm=600)
    await limiter.acquire([group], 300)
    resets = []
    for _ in range(3):
        decision = await limiter.peek([group])
        assert decision.requests is not None
        assert decision.tokens is not None
        resets.append((decision.requests.reset_seconds, decision.tokens.reset_seconds))
        clock.advance(15)
    assert resets == [
        pytest.approx((20.0, 30.0)),
        pytest.approx((5.0, 15.0)),
        pytest.approx((0.0, 0.0)),
    ]


async def test_tokens_come_back_in_proportion(limiter: MemoryLimiter, clock: FakeClock) -> None:
    group = scope("g:1", tpm=60)
    await limiter.acquire([group], 60)
    clock.advance(10)
    decision = await limiter.peek([group])
    assert decision.tokens is not None
    assert decision.tokens.remaining == 10


async def test_debt_is_repaid_by_time(limiter: MemoryLimiter, clock: FakeClock) -> None:
    group = scope("g:1", tpm=60)
    await limiter.acquire([group], 60)
    await limiter.settle([group], 60)
    refused = await limiter.acquire([group], 0)
    assert not refused.allowed
    assert refused.retry_after_seconds == pytest.approx(60.0)
    assert refused.tokens is not None
    assert refused.tokens.reset_seconds == pytest.approx(120.0)
    clock.advance(60)
    assert (await limiter.acquire([group], 0)).allowed


async def test_a_bucket_never_refills_past_its_limit(
    limiter: MemoryLimiter, clock: FakeClock
) -> None:
    group = scope("g:1", rpm=2)
    await limiter.acquire([group], 0)
    clock.advance(3600)
    decision = await limiter.peek([group])
    assert decision.requests is not None
    assert decision.requests.remaining == 2


async def test_full_buckets_are_forgotten_at_the_next_sweep(
    limiter: MemoryLimiter, clock: FakeClock
) -> None:
    for n in range(100):
        await limiter.acquire([scope(f"g:{n}", rpm=60, tpm=6000)], 10)
    assert len(limiter) == 200
    clock.advance(30)
    await limiter.acquire([scope("g:busy", rpm=60)], 0)
    assert len(limiter) == 201, "no sweep before the interval has passed"
    clock.advance(30)
    await limiter.acquire([scope("g:busy", rpm=60)], 0)
    assert len(limiter) == 1, "everything but the bucket just used was full"


async def test_a_bucket_in_debt_is_kept(limiter: MemoryLimiter, clock: FakeClock) -> None:
    group = scope("g:1", tpm=60)
    await limiter.acquire([group], 60)
    await limiter.settle([group], 120)
    clock.advance(61)
    await limiter.peek([group])
    assert len(limiter) == 1
    decision = await limiter.peek([group])
    assert decision.tokens is not None
    assert decision.tokens.reset_seconds == pytest.approx(119.0)


async def test_a_forgotten_bucket_answers_as_full(limiter: MemoryLimiter, clock: FakeClock) -> None:
    group = scope("g:1", rpm=3)
    await limiter.acquire([group], 0)
    clock.advance(120)
    decision = await limiter.acquire([group], 0)
    assert len(limiter) == 1
    assert decision.requests is not None
    assert decision.requests.remaining == 2


async def test_peek_stores_nothing(limiter: MemoryLimiter) -> None:
    await limiter.peek([scope("g:1", rpm=3, tpm=100)])
    assert len(limiter) == 0


async def test_a_limit_of_zero_is_a_configuration_error(limiter: MemoryLimiter) -> None:
    with pytest.raises(ValueError, match="g:1"):
        await limiter.acquire([scope("g:1", rpm=0)], 0)
