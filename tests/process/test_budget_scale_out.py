"""Two ``parley serve`` instances, one Redis, one PostgreSQL database: one budget.

200 calls at once, split between the instances, whole and then streamed, each group
with a budget of $0.001. Every call costs exactly its worst case (``max_tokens`` at an
output-only price), so the pair's spend lands between the budget and the budget plus one
call's worst case: the holds in Redis let each instance see the other's calls in flight.
"""

from __future__ import annotations

import asyncio
import secrets
from datetime import date
from pathlib import Path

import pytest

from parley.store.sql import open_store
from tests.process.calls import MODEL, Chat, burst, gateway_config
from tests.process.conftest import PostgresDatabase
from tests.process.procs import Processes
from tests.process.test_scale_out import REDIS_URL, require_redis

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

CALLS = 200
MAX_TOKENS = 3
WORST = MAX_TOKENS * 10_000
"""Nano-dollars: ``max_tokens`` at ``output_per_1k: 0.01`` dollars."""
BUDGET_USD = "0.001"
BUDGET = 1_000_000


def spend_by_group(database_url: str) -> dict[int, int]:
    async def spend() -> dict[int, int]:
        store = await open_store(database_url)
        try:
            return await store.spend_since(date(2000, 1, 1))
        finally:
            await store.close()

    return asyncio.run(spend())


def test_two_instances_overshoot_a_shared_budget_by_at_most_one_worst_case(
    procs: Processes, engine: str, tmp_path: Path, postgres_db: PostgresDatabase
) -> None:
    require_redis()
    config = gateway_config(
        engine,
        tmp_path,
        database_url=postgres_db.url,
        limits={"backend": "redis"},
        redis={"url": REDIS_URL, "prefix": f"parley-test-{secrets.token_hex(8)}"},
        models=[
            {
                "name": MODEL,
                "kind": "chat",
                "prices": {"input_per_1k": "0", "output_per_1k": "0.01"},
            }
        ],
    )
    config["channels"][0]["models"][0]["upstream"] = "upstream-chat+hang-0.3"  # calls overlap
    first = procs.serve(config, name="first", wait=False)
    second = procs.serve(config, name="second", wait=False)
    keys = {
        stream: first.create_key(f"team-{stream}", "--budget-usd", BUDGET_USD)
        for stream in (False, True)
    }
    first.wait_ready()
    second.wait_ready()

    servers = (first, second)
    statuses = {}
    for stream, key in keys.items():
        chats = [
            Chat(servers[i % 2].v1, key, stream=stream, text="one two three four", max_tokens=3)
            for i in range(CALLS)
        ]
        statuses[stream] = [reply.status for reply in burst(chats, concurrency=CALLS)]

    assert first.terminate() == 0
    assert second.terminate() == 0
    spent = sorted(spend_by_group(postgres_db.url).items())
    assert len(spent) == 2
    for (_, nanos), stream in zip(spent, (False, True), strict=True):
        assert set(statuses[stream]) == {200, 429}
        assert nanos == statuses[stream].count(200) * WORST
        assert BUDGET <= nanos < BUDGET + WORST, f"overshoot {nanos - BUDGET} nanos"
    for server in servers:
        assert "Traceback" not in server.output()
        assert "Redis is unreachable" not in server.output()
