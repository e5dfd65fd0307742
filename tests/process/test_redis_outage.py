"""Redis dies under a running ``parley serve``: calls go on (``local``) or get a clean 503
(``reject``), the log says so once, and no usage is lost.

Redis here is a private ``redis-server`` of the test's own, killed with SIGKILL mid-run.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.process.calls import Chat, Reply, call, gateway_config
from tests.process.procs import Processes, RedisServer, Server, usage_count

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
