"""Two ``parley serve`` instances, one PostgreSQL database, one Redis: one set of limits.

A group allowed 10 requests a minute gets exactly 10 answers from the pair, however the
30 concurrent calls are split between them, and both instances meter into the same
database.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from tests.process.calls import Chat, burst, gateway_config
from tests.process.conftest import PostgresDatabase
from tests.process.procs import Processes, usage_count
from tests.services import REDIS_URL, redis_unreachable

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

RPM = 10
CALLS = 30


def require_redis() -> None:
    reason = redis_unreachable()
    if reason is not None:
        pytest.skip(reason)


def test_two_instances_share_one_rate_limit_and_one_database(
    procs: Processes, engine: str, tmp_path: Path, postgres_db: PostgresDatabase
) -> None:
    require_redis()
    config = gateway_config(
        engine,
        tmp_path,
        database_url=postgres_db.url,
        limits={"backend": "redis"},
        redis={"url": REDIS_URL, "prefix": f"parley-test-{secrets.token_hex(8)}"},
    )
    first = procs.serve(config, name="first", wait=False)
    second = procs.serve(config, name="second", wait=False)
    key = first.create_key("team", "--rpm", str(RPM))
    first.wait_ready()
    second.wait_ready()

    servers = (first, second)
    chats = [Chat(servers[i % 2].v1, key, stream=i % 3 == 0) for i in range(CALLS)]
    replies = burst(chats, concurrency=CALLS)

    ok = [r for r in replies if r.status == 200]
    limited = [r for r in replies if r.status == 429]
    assert (len(ok), len(limited)) == (RPM, CALLS - RPM), [r.status for r in replies]
    # one shared bucket: each remaining count from 9 down to 0 was handed out once
    remaining = sorted(int(r.headers["x-ratelimit-remaining-requests"]) for r in ok)
    assert remaining == list(range(RPM))
    for reply in limited:
        assert int(reply.headers["retry-after"]) >= 1
        assert int(reply.headers["retry-after-ms"]) > 0
        assert reply.headers["x-ratelimit-limit-requests"] == str(RPM)
        assert reply.headers["x-ratelimit-remaining-requests"] == "0"
        error = reply.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["code"] == "rate_limit_exceeded"
        assert error["type"] == "requests"

    assert first.terminate() == 0
    assert second.terminate() == 0
    assert usage_count(postgres_db.url) == RPM
    for server in servers:
        assert "Traceback" not in server.output()
        assert "Redis is unreachable" not in server.output()
