"""FailoverLimiter against a private redis-server that the tests stop and start again."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest
from redis.asyncio import Redis

from parley.domain.groups import Quota
from parley.errors import ServiceUnavailable
from parley.limits.base import Budget, Decision, Scope
from parley.limits.factory import build_limiter
from parley.limits.failover import FailoverLimiter
from parley.limits.memory import MemoryLimiter
from parley.resp import RedisReplyError, RedisUnavailable
from parley.settings import LimitSettings, RedisSettings

RETRY_SECONDS = 0.2
LIMITS = LimitSettings.model_validate({"backend": "redis"})
GROUP = Scope("g:1", Quota(rpm=100, tpm=10_000))


class PrivateRedis:
    """A redis-server of this test's own, on a free port, with nothing saved to disk."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
        self._process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)
            self._process = None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def build(server: PrivateRedis, on_failure: str) -> FailoverLimiter:
    settings = RedisSettings.model_validate(
        {"url": server.url, "on_failure": on_failure, "retry_seconds": RETRY_SECONDS}
    )
    limiter = build_limiter(LIMITS, settings)
    assert isinstance(limiter, FailoverLimiter)
    return limiter


@pytest.fixture
async def local_failover(private_redis: PrivateRedis) -> AsyncIterator[FailoverLimiter]:
    limiter = await build(private_redis, "local")
    yield limiter
    await limiter.close()


@pytest.fixture
async def reject_failover(private_redis: PrivateRedis) -> AsyncIterator[FailoverLimiter]:
    limiter = await build(private_redis, "reject")
    yield limiter
    await limiter.close()


async def buckets_in(server: PrivateRedis, prefix: str = "parley") -> int:
    client = Redis.from_url(server.url)
    try:
        return len([key async for key in client.scan_iter(match=f"{prefix}:rl:*")])
    finally:
        await client.aclose()


def is_degraded(limiter: FailoverLimiter) -> bool:
    """Read through a function, so mypy does not carry narrowing across the outage."""
    return limiter.degraded


def records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("parley") and r.levelno == level]


async def test_an_outage_falls_back_to_local_limits_and_recovers(
    local_failover: FailoverLimiter,
    private_redis: PrivateRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="parley")
    assert (await local_failover.acquire([GROUP], 10)).allowed
    assert await buckets_in(private_redis) == 2
    assert not is_degraded(local_failover)

    private_redis.stop()
    decisions = [await local_failover.acquire([GROUP], 10) for _ in range(5)]
    await local_failover.settle([GROUP], -5)
    await asyncio.sleep(RETRY_SECONDS * 1.5)
    decisions.append(await local_failover.acquire([GROUP], 10))
    assert all(d.allowed for d in decisions)
    assert local_failover.degraded
    assert len(records(caplog, logging.ERROR)) == 1, "one loud line per outage, not per call"

    private_redis.start()
    await asyncio.sleep(RETRY_SECONDS * 1.5)
    assert (await local_failover.acquire([GROUP], 10)).allowed
    assert not is_degraded(local_failover)
    assert await buckets_in(private_redis) == 2, "the primary is used again"
    assert len(records(caplog, logging.INFO)) == 1
    assert len(records(caplog, logging.ERROR)) == 1


async def test_while_degraded_redis_is_left_alone_until_the_retry_time(
    local_failover: FailoverLimiter, private_redis: PrivateRedis
) -> None:
    private_redis.stop()
    await local_failover.acquire([GROUP], 10)
    private_redis.start()
    await local_failover.acquire([GROUP], 10)
    assert local_failover.degraded
    assert await buckets_in(private_redis) == 0


async def test_an_outage_is_a_503_under_the_reject_policy(
    reject_failover: FailoverLimiter, private_redis: PrivateRedis
) -> None:
    assert (await reject_failover.acquire([GROUP], 10)).allowed
    private_redis.stop()
    with pytest.raises(ServiceUnavailable) as refused:
        await reject_failover.acquire([GROUP], 10)
    assert refused.value.status == 503
    assert refused.value.message == "Rate limiting is unavailable; try again shortly."
    with pytest.raises(ServiceUnavailable):
        await reject_failover.peek([GROUP])
    await reject_failover.settle([GROUP], 100)
    assert reject_failover.degraded


BUDGET = Budget("g:1:2026-11-01", limit_nanos=100, spent_nanos=0, seconds_left=3600.0)


async def test_budget_holds_fall_back_to_each_workers_count_during_an_outage(
    local_failover: FailoverLimiter, private_redis: PrivateRedis
) -> None:
    assert await local_failover.hold_spend(BUDGET, "in-redis", 60)
    private_redis.stop()
    # the local count starts from the worker's own view of the spend, not Redis's holds
    assert await local_failover.hold_spend(BUDGET, "local", 100)
    assert not await local_failover.hold_spend(BUDGET, "refused", 1)
    await local_failover.release_spend(BUDGET, "in-redis", 60, 0)  # nothing of it here
    assert not await local_failover.hold_spend(BUDGET, "still-refused", 1)
    await local_failover.release_spend(BUDGET, "local", 100, 0)
    assert await local_failover.hold_spend(BUDGET, "room-again", 1)
    assert local_failover.degraded


async def test_a_hold_taken_during_an_outage_ends_locally_once_redis_is_back(
    local_failover: FailoverLimiter, private_redis: PrivateRedis
) -> None:
    private_redis.stop()
    assert await local_failover.hold_spend(BUDGET, "local", 100)
    private_redis.start()
    await asyncio.sleep(RETRY_SECONDS * 1.5)
    await local_failover.release_spend(BUDGET, "local", 100, 0)  # reaches Redis: back
    assert not is_degraded(local_failover)
    private_redis.stop()
    # the next outage's local count holds nothing from the last one
    assert await local_failover.hold_spend(BUDGET, "next-outage", 1)
    assert is_degraded(local_failover)


async def test_budget_holds_are_a_503_under_the_reject_policy(
    reject_failover: FailoverLimiter, private_redis: PrivateRedis
) -> None:
    assert await reject_failover.hold_spend(BUDGET, "a", 10)
    private_redis.stop()
    with pytest.raises(ServiceUnavailable):
        await reject_failover.hold_spend(BUDGET, "b", 10)
    await reject_failover.release_spend(BUDGET, "a", 10, 10)  # dropped, never raised
    assert reject_failover.degraded


class BrokenPrimary:
    """A primary that fails with a given error; stands in for Redis without a server."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    async def acquire(self, scopes: Sequence[Scope], tokens: int) -> Decision:
        self.calls += 1
        raise self.error

    async def settle(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        raise self.error

    async def peek(self, scopes: Sequence[Scope]) -> Decision:
        raise self.error

    async def close(self) -> None:
        return None


async def test_retry_waits_for_retry_seconds_on_the_clock() -> None:
    now = [0.0]
    primary = BrokenPrimary(RedisUnavailable("refused"))
    limiter = FailoverLimiter(
        primary, MemoryLimiter(), on_failure="local", retry_seconds=5.0, clock=lambda: now[0]
    )
    for _ in range(3):
        await limiter.acquire([GROUP], 1)
    assert primary.calls == 1
    now[0] = 5.0
    await limiter.acquire([GROUP], 1)
    await limiter.acquire([GROUP], 1)
    assert primary.calls == 2


@pytest.mark.parametrize("error", [TimeoutError("slow"), ConnectionResetError("reset")])
async def test_socket_errors_count_as_an_outage(error: Exception) -> None:
    limiter = FailoverLimiter(BrokenPrimary(error), MemoryLimiter(), retry_seconds=1.0)
    assert (await limiter.acquire([GROUP], 1)).allowed
    assert limiter.degraded


async def test_other_errors_are_not_an_outage() -> None:
    limiter = FailoverLimiter(
        BrokenPrimary(RedisReplyError("WRONGTYPE")), MemoryLimiter(), retry_seconds=1.0
    )
    with pytest.raises(RedisReplyError):
        await limiter.acquire([GROUP], 1)
    assert not limiter.degraded


async def test_the_memory_backend_needs_no_redis() -> None:
    assert isinstance(build_limiter(LimitSettings.model_validate({}), None), MemoryLimiter)


async def test_the_prefix_setting_names_the_keys(private_redis: PrivateRedis) -> None:
    prefix = f"t-{uuid.uuid4().hex}"
    settings = RedisSettings.model_validate({"url": private_redis.url, "prefix": prefix})
    limiter = build_limiter(LIMITS, settings)
    try:
        await limiter.acquire([GROUP], 1)
        assert await buckets_in(private_redis) == 0
        assert await buckets_in(private_redis, prefix) == 2
    finally:
        await limiter.close()


async def test_calls_that_need_no_redis_never_end_an_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    primary = BrokenPrimary(RedisUnavailable("refused"))
    limiter = FailoverLimiter(
        primary, MemoryLimiter(), on_failure="local", retry_seconds=1.0, clock=lambda: now[0]
    )
    await limiter.acquire([GROUP], 1)
    assert limiter.degraded
    now[0] = 2.0  # past retry_seconds
    assert (await limiter.acquire([Scope("g:2", Quota())], 5)).allowed  # unlimited: no Redis
    await limiter.settle([GROUP], 0)  # nothing to correct: no Redis
    assert limiter.degraded
    assert "reachable again" not in caplog.text
    assert primary.calls == 1
