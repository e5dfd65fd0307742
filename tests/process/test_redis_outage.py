"""Redis dies under a running ``parley serve``: calls go on (``local``) or get a clean 503
(``reject``), the log says so once, and no usage is lost.

Redis here is a private ``redis-server`` of the test's own, killed with SIGKILL mid-run,
or frozen with SIGSTOP (a hung Redis: connections open, nothing answers), reached through
a ``TcpProxy`` that counts the commands sent to it.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from parley.domain.groups import Quota
from parley.errors import ServiceUnavailable
from parley.limits.base import Limiter, Scope
from parley.limits.factory import build_limiter
from parley.limits.failover import FailoverLimiter
from parley.settings import LimitSettings, RedisSettings
from tests.process.calls import Chat, Reply, call, gateway_config
from tests.process.procs import Processes, RedisServer, Server, usage_count
from tests.process.proxy import TcpProxy

pytestmark = pytest.mark.redis

CALLS = 40
BEFORE_OUTAGE = 10
RETRY_SECONDS = 0.3
PAUSE = 0.03
"""Between calls, so the outage spans several retry intervals."""
UNREACHABLE = "Redis is unreachable for rate limiting"


def start(
    procs: Processes, engine: str, tmp_path: Path, on_failure: str
) -> tuple[RedisServer, Server, list[str], str]:
    """Redis, a gateway using it, and two keys: a limited group's and an unlimited one's."""
    redis = procs.redis()
    database = f"sqlite:///{tmp_path / 'parley.db'}"
    config = gateway_config(
        engine,
        tmp_path,
        database_url=database,
        limits={"backend": "redis"},
        redis={"url": redis.url, "on_failure": on_failure, "retry_seconds": RETRY_SECONDS},
    )
    server = procs.serve(config, wait=False)
    with ThreadPoolExecutor(2) as pool:  # two CLI chains at once, while the server starts
        chains = [
            pool.submit(server.create_key, "team", "--rpm", "100000"),
            pool.submit(server.create_key, "free"),
        ]
        keys = [chain.result(timeout=120) for chain in chains]
    server.wait_ready()
    return redis, server, keys, database


def calls(server: Server, keys: list[str], count: int, start: int = 0) -> list[Reply]:
    """``count`` calls, one at a time, alternating keys and plain/streamed."""
    replies = []
    for number in range(start, start + count):
        chat = Chat(server.v1, keys[number % 2], stream=number % 4 > 1, text=f"call {number}")
        replies.append(call(chat))
        time.sleep(PAUSE)
    return replies


def error_lines(server: Server) -> list[str]:
    return [line for line in server.output().splitlines() if " ERROR " in line]


def test_with_on_failure_local_every_call_succeeds_and_is_metered(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    redis, server, keys, database = start(procs, engine, tmp_path, "local")
    before = calls(server, keys, BEFORE_OUTAGE)
    assert [r.status for r in before] == [200] * BEFORE_OUTAGE
    assert before[0].headers["x-ratelimit-limit-requests"] == "100000"

    redis.proc.kill()
    during = calls(server, keys, CALLS - BEFORE_OUTAGE, start=BEFORE_OUTAGE)

    assert [r.status for r in during] == [200] * len(during)
    assert during[0].headers["x-ratelimit-limit-requests"] == "100000"  # local buckets
    errors = error_lines(server)
    assert len(errors) == 1, errors
    assert UNREACHABLE in errors[0]
    assert "limiting locally in each worker" in errors[0]
    assert "reachable again" not in server.output()
    assert "Traceback" not in server.output()

    assert server.terminate() == 0
    assert usage_count(database) == CALLS


def test_with_on_failure_reject_calls_get_503_until_redis_is_back(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    redis, server, keys, database = start(procs, engine, tmp_path, "reject")
    before = calls(server, keys, BEFORE_OUTAGE)
    assert [r.status for r in before] == [200] * BEFORE_OUTAGE

    redis.proc.kill()
    during = calls(server, keys, 10, start=BEFORE_OUTAGE)

    assert [r.status for r in during] == [503] * len(during)
    for reply in during:
        assert reply.json() == {
            "error": {
                "message": "Rate limiting is unavailable; try again shortly.",
                "type": "server_error",
                "param": None,
                "code": "service_unavailable",
            }
        }
        assert reply.headers["retry-after"] == "1"
    errors = error_lines(server)
    assert len(errors) == 1, errors
    assert UNREACHABLE in errors[0]
    assert "refusing calls with 503" in errors[0]

    procs.redis(port=redis.port)  # Redis is back (empty): calls pass again
    deadline = time.monotonic() + 5
    while (reply := call(Chat(server.v1, keys[0]))).status != 200:
        assert reply.status == 503
        assert time.monotonic() < deadline, "calls still refused 5s after Redis came back"
        time.sleep(0.05)
    assert "Redis is reachable again" in server.output()

    assert server.terminate() == 0
    assert usage_count(database) == BEFORE_OUTAGE + 1
    assert "Traceback" not in server.output()


SCOPES = [Scope("g:1", Quota(rpm=100, tpm=100_000))]


def limiter_through(proxy: TcpProxy, on_failure: str) -> Limiter:
    """The limiter ``serve`` builds, talking to Redis through ``proxy``."""
    settings = RedisSettings(
        url=f"redis://127.0.0.1:{proxy.port}/0",
        on_failure=on_failure,  # type: ignore[arg-type]
        retry_seconds=60,
        prefix=f"parley-test-{secrets.token_hex(4)}",
    )
    return build_limiter(LimitSettings(backend="redis"), settings)


def attempts(proxy: TcpProxy) -> tuple[int, int]:
    """Rate-limit scripts sent to Redis so far (each attempt sends one EVALSHA), and the
    connections opened (a retry after a timeout reconnects first, and waits again)."""
    return proxy.sent.count(b"EVALSHA"), proxy.connections


@pytest.mark.parametrize("on_failure", ["local", "reject"])
async def test_a_frozen_redis_is_tried_once_per_call_not_twice(
    procs: Processes, on_failure: str
) -> None:
    """A hung Redis (SIGSTOP: connections open, nothing answers) costs the call one read
    timeout: the timed-out command is not sent again. The call is then answered locally
    (or refused), and the next ones leave Redis alone until ``retry_seconds``."""
    redis = procs.redis()
    async with TcpProxy(redis.port) as proxy:
        limiter = limiter_through(proxy, on_failure)
        try:
            assert (await limiter.acquire(SCOPES, 10)).allowed
            scripts, connections = attempts(proxy)
            os.kill(redis.proc.pid, signal.SIGSTOP)
            try:
                if on_failure == "local":
                    assert (await limiter.acquire(SCOPES, 10)).allowed
                    assert (await limiter.acquire(SCOPES, 10)).allowed
                else:
                    for _ in range(2):
                        with pytest.raises(ServiceUnavailable):
                            await limiter.acquire(SCOPES, 10)
                assert attempts(proxy) == (scripts + 1, connections)
                assert isinstance(limiter, FailoverLimiter) and limiter.degraded
            finally:
                os.kill(redis.proc.pid, signal.SIGCONT)
        finally:
            await limiter.close()


async def test_a_connection_redis_dropped_is_retried_once_at_once(procs: Processes) -> None:
    """A reset connection (Redis restarted, a proxy cut) is retried on a new one, so the
    call still reaches Redis: connection errors keep their one immediate retry."""
    redis = procs.redis()
    async with TcpProxy(redis.port) as proxy:
        limiter = limiter_through(proxy, "reject")
        try:
            assert (await limiter.acquire(SCOPES, 10)).allowed
            await proxy.cut()  # resets the pooled connection
            await proxy.restore()
            decision = await limiter.acquire(SCOPES, 10)
            assert decision.allowed
            assert decision.requests is not None and decision.requests.remaining == 98
            assert isinstance(limiter, FailoverLimiter) and not limiter.degraded
        finally:
            await limiter.close()
