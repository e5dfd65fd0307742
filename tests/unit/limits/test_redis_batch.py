"""The Redis limiter's calls made in one turn of the event loop go out as one pipeline,
each script still checked on its own (the suite's real Redis, ``tests/services.py``;
skipped without)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from parley.domain.groups import Quota
from parley.limits.base import Scope
from parley.limits.redis import RedisLimiter
from parley.resp import RedisClient, RedisUnavailable
from tests.contract.test_limiter import delete_prefix, redis_limiter, redis_or_skip
from tests.services import REDIS_URL

pytestmark = pytest.mark.redis


class CountingRedis:
    """The client, counting the pipelines it is asked for."""

    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self.pipelines = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        self.pipelines += 1
        return self.client.pipeline(*args, **kwargs)


@pytest.fixture
async def client() -> AsyncIterator[Redis]:
    prefix_client = await redis_or_skip()
    yield prefix_client
    await prefix_client.aclose()


async def test_calls_of_one_turn_share_a_pipeline_and_are_each_checked(client: Redis) -> None:
    prefix = f"test-{uuid.uuid4().hex}"
    counting = CountingRedis(RedisClient.from_url(REDIS_URL))
    limiter = RedisLimiter(counting, prefix, owns_client=True)  # type: ignore[arg-type]
    group = Scope("g:1", Quota(rpm=10, tpm=1_000))
    try:
        decisions = await asyncio.gather(*(limiter.acquire([group], 30) for _ in range(40)))
        # tokens run out first: 1,000 / 30 = 33, but only 10 requests a minute
        assert sum(d.allowed for d in decisions) == 10
        assert counting.pipelines == 1
        await asyncio.gather(*(limiter.settle([group], -30) for _ in range(10)))
        assert counting.pipelines == 2
        assert (await limiter.peek([group])).tokens is not None
    finally:
        await limiter.close()
        await delete_prefix(client, prefix)


async def test_flushed_scripts_are_loaded_again(client: Redis) -> None:
    prefix = f"test-{uuid.uuid4().hex}"
    limiter = redis_limiter(prefix)
    group = Scope("g:1", Quota(rpm=5))
    try:
        await client.script_flush()
        decisions = await asyncio.gather(*(limiter.acquire([group], 0) for _ in range(7)))
        assert sum(d.allowed for d in decisions) == 5
    finally:
        await limiter.close()
        await delete_prefix(client, prefix)


async def test_redis_away_fails_every_call_of_the_pipeline() -> None:
    away = RedisClient.from_url("redis://127.0.0.1:1/0", connect_timeout=1)
    limiter = RedisLimiter(away, "away")
    group = Scope("g:1", Quota(rpm=5))
    results = await asyncio.gather(
        *(limiter.acquire([group], 0) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(result, RedisUnavailable) for result in results)
    await away.aclose()
