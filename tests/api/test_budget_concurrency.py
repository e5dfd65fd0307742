"""A budget under concurrency: 200 calls at once at a tiny budget, whole and streamed.

Each call's worst case is held at admission, so concurrent calls see each other and the
group spends at most its budget plus one call's worst case, however many calls arrive
together. The model here is priced on output only and every call produces exactly its
``max_tokens``, so a call costs its worst case and the overshoot is measured at its
largest. Runs on one gateway with the memory limiter, and with Redis.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import aiohttp
import pytest

from tests.api.harness import Config, Gateway, StartGateway, records
from tests.services import REDIS_URL, redis_unreachable
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

CALLS = 200
MAX_TOKENS = 3
NANOS_PER_OUTPUT_TOKEN = 10_000
"""``output_per_1k: 0.01`` dollars."""
WORST = MAX_TOKENS * NANOS_PER_OUTPUT_TOKEN
BUDGET = 1_000_000
"""A tenth of a cent: 33 calls' worth, and a 34th may start."""


def require_redis() -> None:
    reason = redis_unreachable()
    if reason is not None:
        pytest.skip(reason)


def priced_on_output(config: Config) -> None:
    config["models"][0]["prices"] = {"input_per_1k": "0", "output_per_1k": "0.01"}


async def burst(gateway: Gateway, key: str, *, stream: bool) -> list[int]:
    """``CALLS`` chat calls sent at once; their statuses (every body read to its end)."""
    body: dict[str, Any] = {
        "model": "chat-large",
        "messages": [{"role": "user", "content": "one two three four"}],
        "max_tokens": MAX_TOKENS,
        "stream": stream,
    }
    headers = {"Authorization": f"Bearer {key}"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> int:
            async with session.post(
                f"{gateway.v1}/chat/completions", json=body, headers=headers
            ) as reply:
                await reply.read()
                return reply.status

        return list(await asyncio.gather(*(one() for _ in range(CALLS))))


@pytest.mark.parametrize("backend", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_concurrent_calls_overshoot_a_budget_by_at_most_one_worst_case(
    start_gateway: StartGateway, engine: FakeEngine, backend: str, stream: bool
) -> None:
    def tweak(config: Config) -> None:
        priced_on_output(config)
        if backend == "redis":
            config["limits"] = {**config["limits"], "backend": "redis"}
            config["redis"] = {"url": REDIS_URL, "prefix": secrets.token_hex(8)}

    if backend == "redis":
        require_redis()
    gateway = await start_gateway(tweak)
    engine.behaviour = Behaviour(hang=0.3)  # the calls overlap
    group = await gateway.group("team", budget_nanos=BUDGET)
    key = await gateway.key(group)

    statuses = await burst(gateway, key, stream=stream)

    metered = await records(gateway)
    spent = sum(record.cost_nanos for record in metered)
    assert {record.completion_tokens for record in metered} == {MAX_TOKENS}
    assert set(statuses) == {200, 429}
    assert spent == statuses.count(200) * WORST
    # some call was refused, so spent and held reached the budget, and each call held
    # what it cost: the budget is reached and overshot by less than one call
    assert BUDGET <= spent < BUDGET + WORST, f"overshoot {spent - BUDGET} nanos"
    assert gateway.services.meter.ledger.spent(group.id) == spent
