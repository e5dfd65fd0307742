"""The limiter contract: every ``Limiter`` implementation answers these the same way.

Runs against ``MemoryLimiter`` and ``RedisLimiter`` (the suite's Redis, named in
``tests/services.py``; each test under its own random key prefix). The tests use real
time, so they only rely on what holds within a few seconds: at rpm=3 a bucket refills
one request every 20 s, so waits are checked to within ``SLACK`` seconds.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from parley.domain.groups import Quota
from parley.limits import redis as redis_limits
from parley.limits.base import UNLIMITED, Budget, Limiter, Scope
from parley.limits.memory import MemoryLimiter
from parley.limits.redis import RedisLimiter
from parley.resp import RedisClient
from tests.services import REDIS_URL

REPO_ROOT = str(Path(__file__).resolve().parents[2])
SLACK = 2.0
"""Seconds of real time a test may take between its calls."""


def scope(name: str, rpm: int | None = None, tpm: int | None = None) -> Scope:
    return Scope(name, Quota(rpm=rpm, tpm=tpm))


async def redis_or_skip() -> Redis:
    client = Redis.from_url(REDIS_URL)
    try:
        await client.ping()
    except (RedisConnectionError, OSError):
        await client.aclose()
        pytest.skip(f"no Redis at {REDIS_URL}")
    return client


def redis_limiter(prefix: str) -> RedisLimiter:
    """A limiter on a client of its own (Parley's, ``parley.resp``), closed with it; the
    tests look into Redis with redis-py."""
    return RedisLimiter(RedisClient.from_url(REDIS_URL), prefix, owns_client=True)


async def delete_prefix(client: Redis, prefix: str) -> None:
    keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
    if keys:
        await client.delete(*keys)


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def limiter(request: pytest.FixtureRequest, prefix: str) -> AsyncIterator[Limiter]:
    if request.param == "memory":
        memory = MemoryLimiter()
        yield memory
        await memory.close()
        return
    client = await redis_or_skip()
    shared = redis_limiter(prefix)
    try:
        yield shared
    finally:
        await shared.close()
        await delete_prefix(client, prefix)
        await client.aclose()


# Requests


async def test_remaining_requests_count_down(limiter: Limiter) -> None:
    group = scope("g:1", rpm=3)
    remaining = []
    for _ in range(3):
        decision = await limiter.acquire([group], 0)
        assert decision.allowed
        assert decision.requests is not None
        assert decision.requests.limit == 3
        remaining.append(decision.requests.remaining)
    assert remaining == [2, 1, 0]


async def test_a_refused_call_says_when_to_retry(limiter: Limiter) -> None:
    group = scope("g:1", rpm=3)
    for _ in range(3):
        await limiter.acquire([group], 0)
    decision = await limiter.acquire([group], 0)
    assert not decision.allowed
    assert decision.limited_by == "requests"
    assert not decision.too_large
    assert 20.0 - SLACK <= decision.retry_after_seconds <= 20.0
    assert decision.requests is not None
    assert decision.requests.remaining == 0


async def test_reset_is_the_time_until_the_bucket_is_full(limiter: Limiter) -> None:
    decision = await limiter.acquire([scope("g:1", rpm=3)], 0)
    assert decision.requests is not None
    assert 20.0 - SLACK <= decision.requests.reset_seconds <= 20.0


async def test_a_fresh_bucket_is_full(limiter: Limiter) -> None:
    decision = await limiter.peek([scope("g:1", rpm=3, tpm=100)])
    assert decision.allowed
    assert decision.requests is not None
    assert decision.tokens is not None
    assert (decision.requests.remaining, decision.requests.reset_seconds) == (3, 0.0)
    assert (decision.tokens.remaining, decision.tokens.reset_seconds) == (100, 0.0)


# Tokens


async def test_tokens_are_taken_by_the_amount_asked(limiter: Limiter) -> None:
    decision = await limiter.acquire([scope("g:1", tpm=100)], 30)
    assert decision.allowed
    assert decision.tokens is not None
    assert (decision.tokens.limit, decision.tokens.remaining) == (100, 70)
    assert 18.0 - SLACK <= decision.tokens.reset_seconds <= 18.0


async def test_tokens_short_refuse_and_take_nothing(limiter: Limiter) -> None:
    group = scope("g:1", rpm=10, tpm=100)
    await limiter.acquire([group], 80)
    decision = await limiter.acquire([group], 30)
    assert not decision.allowed
    assert decision.limited_by == "tokens"
    assert not decision.too_large
    assert 6.0 - SLACK <= decision.retry_after_seconds <= 6.0
    after = await limiter.peek([group])
    assert after.requests is not None
    assert after.tokens is not None
    assert after.requests.remaining == 9
    assert after.tokens.remaining == 20


async def test_a_call_larger_than_the_limit_can_never_fit(limiter: Limiter) -> None:
    group = scope("g:1", rpm=10, tpm=100)
    decision = await limiter.acquire([group], 101)
    assert not decision.allowed
    assert decision.too_large
    assert decision.limited_by == "tokens"
    assert decision.tokens is not None
    assert decision.tokens.limit == 100
    after = await limiter.peek([group])
    assert after.requests is not None
    assert after.tokens is not None
    assert (after.requests.remaining, after.tokens.remaining) == (10, 100)


async def test_the_longer_wait_names_the_limit(limiter: Limiter) -> None:
    # Both buckets empty: a request comes back in 30 s, 600 tokens in 60 s. (With equal
    # waits the name would hang on the time that passed between the calls.)
    group = scope("g:1", rpm=2, tpm=600)
    await limiter.acquire([group], 300)
    await limiter.acquire([group], 300)
    decision = await limiter.acquire([group], 600)
    assert not decision.allowed
    assert decision.limited_by == "tokens"
    assert 60.0 - SLACK <= decision.retry_after_seconds <= 60.0


# Settle


async def test_a_refund_restores_remaining(limiter: Limiter) -> None:
    group = scope("g:1", tpm=100)
    await limiter.acquire([group], 60)
    await limiter.settle([group], -50)
    decision = await limiter.peek([group])
    assert decision.tokens is not None
    assert decision.tokens.remaining == 90


async def test_a_refund_never_fills_past_the_limit(limiter: Limiter) -> None:
    group = scope("g:1", tpm=100)
    await limiter.acquire([group], 10)
    await limiter.settle([group], -1000)
    decision = await limiter.peek([group])
    assert decision.tokens is not None
    assert (decision.tokens.remaining, decision.tokens.reset_seconds) == (100, 0.0)


async def test_extra_usage_is_debt_that_refuses_the_next_call(limiter: Limiter) -> None:
    group = scope("g:1", rpm=10, tpm=100)
    await limiter.acquire([group], 90)
    await limiter.settle([group], 50)
    peeked = await limiter.peek([group])
    assert not peeked.allowed
    assert peeked.tokens is not None
    assert peeked.tokens.remaining == 0
    assert 84.0 - SLACK <= peeked.tokens.reset_seconds <= 84.0
    decision = await limiter.acquire([group], 1)
    assert not decision.allowed
    assert decision.limited_by == "tokens"
    assert 24.6 - SLACK <= decision.retry_after_seconds <= 24.6


async def test_settle_leaves_requests_and_unlimited_scopes_alone(limiter: Limiter) -> None:
    group, key = scope("g:1", rpm=5), scope("k:1")
    await limiter.acquire([group, key], 10)
    await limiter.settle([group, key], 1000)
    decision = await limiter.peek([group, key])
    assert decision.allowed
    assert decision.requests is not None
    assert decision.requests.remaining == 4
    assert decision.tokens is None


# Several scopes


async def test_a_call_refused_by_one_scope_takes_from_none(limiter: Limiter) -> None:
    group, key = scope("g:1", rpm=10, tpm=1000), scope("k:1", rpm=1)
    assert (await limiter.acquire([group, key], 100)).allowed
    refused = await limiter.acquire([group, key], 100)
    assert not refused.allowed
    assert refused.limited_by == "requests"
    alone = await limiter.peek([group])
    assert alone.requests is not None
    assert alone.tokens is not None
    assert (alone.requests.remaining, alone.tokens.remaining) == (9, 900)


async def test_the_tightest_scope_is_reported(limiter: Limiter) -> None:
    group, key = scope("g:1", rpm=10, tpm=1000), scope("k:1", rpm=3)
    decision = await limiter.acquire([group, key], 100)
    assert decision.requests is not None
    assert (decision.requests.limit, decision.requests.remaining) == (3, 2)
    assert decision.tokens is not None
    assert (decision.tokens.limit, decision.tokens.remaining) == (1000, 900)


async def test_tightest_means_fewest_remaining_not_smallest_limit(limiter: Limiter) -> None:
    group, key = scope("g:1", tpm=1000), scope("k:1", tpm=500)
    decision = await limiter.acquire([group, key], 400)
    assert decision.tokens is not None
    assert (decision.tokens.limit, decision.tokens.remaining) == (500, 100)
    await limiter.acquire([group], 550)
    decision = await limiter.peek([group, key])
    assert decision.tokens is not None
    assert (decision.tokens.limit, decision.tokens.remaining) == (1000, 50)


async def test_scopes_are_separate(limiter: Limiter) -> None:
    await limiter.acquire([scope("g:1", rpm=1)], 0)
    decision = await limiter.acquire([scope("g:2", rpm=1)], 0)
    assert decision.allowed


async def test_a_scope_named_twice_is_taken_once(limiter: Limiter) -> None:
    group = scope("g:1", rpm=2)
    decision = await limiter.acquire([group, group], 0)
    assert decision.allowed
    assert decision.requests is not None
    assert decision.requests.remaining == 1


# Unlimited


async def test_an_unlimited_dimension_has_no_window(limiter: Limiter) -> None:
    decision = await limiter.acquire([scope("g:1", rpm=5)], 10_000_000)
    assert decision.allowed
    assert decision.requests is not None
    assert decision.tokens is None
    decision = await limiter.acquire([scope("g:2", tpm=50)], 5)
    assert decision.requests is None
    assert decision.tokens is not None


async def test_no_limits_at_all_is_unlimited(limiter: Limiter) -> None:
    assert await limiter.acquire([scope("g:1")], 10_000_000) == UNLIMITED
    assert await limiter.acquire([], 5) == UNLIMITED
    assert await limiter.peek([scope("g:1")]) == UNLIMITED


# Peek


async def test_peek_takes_nothing(limiter: Limiter) -> None:
    group = scope("g:1", rpm=3, tpm=100)
    await limiter.acquire([group], 40)
    first = await limiter.peek([group])
    second = await limiter.peek([group])
    assert first.allowed
    for decision in (first, second):
        assert decision.requests is not None
        assert decision.tokens is not None
        assert (decision.requests.remaining, decision.tokens.remaining) == (2, 60)


async def test_peek_on_an_empty_bucket_is_refused_with_a_wait(limiter: Limiter) -> None:
    group = scope("g:1", rpm=1)
    await limiter.acquire([group], 0)
    decision = await limiter.peek([group])
    assert not decision.allowed
    assert decision.limited_by == "requests"
    assert 60.0 - SLACK <= decision.retry_after_seconds <= 60.0


# Shared across processes (Redis only)


@pytest.mark.redis
async def test_two_instances_share_one_limit_under_concurrency(prefix: str) -> None:
    clients = [await redis_or_skip(), await redis_or_skip()]
    try:
        limiters = [redis_limiter(prefix) for _ in clients]
        group = scope("g:1", rpm=10)
        calls = [limiters[i % 2].acquire([group], 0) for i in range(50)]
        decisions = await asyncio.gather(*calls)
        assert sum(d.allowed for d in decisions) == 10
    finally:
        for shared in limiters:
            await shared.close()
        await delete_prefix(clients[0], prefix)
        for client in clients:
            await client.aclose()


CHILD = """
import asyncio, sys
from parley.domain.groups import Quota
from parley.limits.base import Scope
from parley.limits.redis import RedisLimiter
from parley.resp import RedisClient

async def main() -> None:
    client = RedisClient.from_url(sys.argv[1])
    limiter = RedisLimiter(client, sys.argv[2])
    group = Scope("g:1", Quota(rpm=10))
    decisions = await asyncio.gather(*(limiter.acquire([group], 0) for _ in range(25)))
    print(sum(d.allowed for d in decisions))
    await client.aclose()

asyncio.run(main())
"""


@pytest.mark.redis
async def test_two_processes_share_one_limit(prefix: str) -> None:
    client = await redis_or_skip()
    paths = [REPO_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    try:
        children = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                CHILD,
                REDIS_URL,
                prefix,
                env=env,
                stdout=asyncio.subprocess.PIPE,
            )
            for _ in range(2)
        ]
        outputs = [await child.communicate() for child in children]
        assert [child.returncode for child in children] == [0, 0]
        assert sum(int(out) for out, _ in outputs) == 10
    finally:
        await delete_prefix(client, prefix)
        await client.aclose()


@pytest.mark.redis
async def test_redis_keys_expire_once_the_bucket_would_be_full(prefix: str) -> None:
    client = await redis_or_skip()
    try:
        limiter = redis_limiter(prefix)
        await limiter.acquire([scope("g:1", rpm=3, tpm=1000)], 500)
        requests_ttl = await client.pttl(f"{prefix}:rl:g:1:r")
        tokens_ttl = await client.pttl(f"{prefix}:rl:g:1:t")
        assert 20_000 < requests_ttl <= 21_000
        assert 30_000 < tokens_ttl <= 31_000
    finally:
        await limiter.close()
        await delete_prefix(client, prefix)
        await client.aclose()


# Budget holds


def budget(limit: int, spent: int = 0, name: str = "g:1:2026-11-01") -> Budget:
    return Budget(name, limit_nanos=limit, spent_nanos=spent, seconds_left=3600.0)


async def test_holds_are_taken_until_spent_and_held_reach_the_limit(limiter: Limiter) -> None:
    taken = [await limiter.hold_spend(budget(100), f"call-{i}", 40) for i in range(4)]
    # 0, 40 and 80 were below 100 when asked; 120 is not
    assert taken == [True, True, True, False]


async def test_a_release_gives_the_hold_back_and_counts_the_cost(limiter: Limiter) -> None:
    assert await limiter.hold_spend(budget(100), "a", 60)
    assert await limiter.hold_spend(budget(100), "b", 60)
    assert not await limiter.hold_spend(budget(100), "c", 1)  # 120 held
    await limiter.release_spend(budget(100), "a", 60, 25)
    assert await limiter.hold_spend(budget(100), "d", 20)  # 25 spent + 60 held < 100
    assert not await limiter.hold_spend(budget(100), "e", 1)  # 25 + 80
    await limiter.release_spend(budget(100), "b", 60, 0)
    await limiter.release_spend(budget(100), "d", 20, 0)
    assert await limiter.hold_spend(budget(100), "f", 1)  # 25 spent, nothing held


async def test_the_callers_spend_is_a_floor_the_count_never_falls_below(
    limiter: Limiter,
) -> None:
    assert not await limiter.hold_spend(budget(100, spent=100, name="g:9:2026-11-01"), "a", 1)
    assert await limiter.hold_spend(budget(100, spent=50), "b", 10)
    await limiter.release_spend(budget(100, spent=50), "b", 10, 50)  # the count is 100 now
    # a caller whose own view lags (0) is still refused: the count kept 100
    assert not await limiter.hold_spend(budget(100, spent=0), "c", 1)


async def test_releasing_an_unknown_hold_gives_nothing_back(limiter: Limiter) -> None:
    assert await limiter.hold_spend(budget(100), "a", 100)
    await limiter.release_spend(budget(100), "elsewhere", 100, 0)
    assert not await limiter.hold_spend(budget(100), "b", 1)  # "a" still holds 100


async def test_budgets_of_other_groups_and_periods_are_apart(limiter: Limiter) -> None:
    assert await limiter.hold_spend(budget(100), "a", 100)
    assert not await limiter.hold_spend(budget(100), "b", 1)
    assert await limiter.hold_spend(budget(100, name="g:2:2026-11-01"), "c", 1)
    assert await limiter.hold_spend(budget(100, name="g:1:2026-12-01"), "d", 1)


async def test_concurrent_holds_see_each_other(limiter: Limiter) -> None:
    holds = [limiter.hold_spend(budget(1000), f"call-{i}", 10) for i in range(200)]
    assert sum(await asyncio.gather(*holds)) == 100


@pytest.mark.redis
async def test_two_instances_share_one_budget_under_concurrency(prefix: str) -> None:
    clients = [await redis_or_skip(), await redis_or_skip()]
    try:
        limiters = [redis_limiter(prefix) for _ in clients]
        holds = [limiters[i % 2].hold_spend(budget(1000), f"call-{i}", 10) for i in range(200)]
        taken = await asyncio.gather(*holds)
        assert sum(taken) == 100
        first, second = [f"call-{i}" for i, held in enumerate(taken) if held][:2]
        await limiters[0].release_spend(budget(1000), first, 10, 10)
        await limiters[1].release_spend(budget(1000), second, 10, 0)
        # each instance's releases are seen by the other: 10 spent + 980 held
        assert await limiters[1].hold_spend(budget(1000), "late", 10)
        assert not await limiters[0].hold_spend(budget(1000), "later", 10)
    finally:
        for shared in limiters:
            await shared.close()
        await delete_prefix(clients[0], prefix)
        for client in clients:
            await client.aclose()


@pytest.mark.redis
async def test_redis_holds_lapse_so_a_dead_instance_frees_its_holds(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = await redis_or_skip()
    monkeypatch.setattr(redis_limits, "HOLD_SECONDS", 1)
    try:
        limiter = redis_limiter(prefix)
        assert await limiter.hold_spend(budget(100), "died", 100)
        assert not await limiter.hold_spend(budget(100), "waits", 1)
        await asyncio.sleep(1.2)
        assert await limiter.hold_spend(budget(100), "after", 1)
        # a release after the hold lapsed gives nothing back twice, but counts the cost
        await limiter.release_spend(budget(100), "died", 100, 99)
        assert not await limiter.hold_spend(budget(100), "full", 1)  # 99 + 1 held
    finally:
        await limiter.close()
        await delete_prefix(client, prefix)
        await client.aclose()
