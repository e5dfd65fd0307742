"""A key's own budget under concurrency, as a group's: 200 calls at once with a key whose
budget is a tenth of a cent, in a group with a large one. Each call's worst case is held
against both at admission, so the key spends at most its budget plus one call's worst
case, with the memory limiter and with Redis."""

from __future__ import annotations

import secrets

import pytest

from parley.store.base import KeyChanges
from tests.api.harness import Config, StartGateway, records
from tests.api.test_budget_concurrency import (
    BUDGET,
    MAX_TOKENS,
    WORST,
    burst,
    priced_on_output,
    require_redis,
)
from tests.services import REDIS_URL
from tests.upstreams.openai_compatible import Behaviour, FakeEngine


@pytest.mark.parametrize("backend", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def test_concurrent_calls_overshoot_a_keys_budget_by_at_most_one_worst_case(
    start_gateway: StartGateway, engine: FakeEngine, backend: str
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
    group = await gateway.group("team", budget_nanos=100 * BUDGET)
    key = await gateway.key(group)
    store = gateway.services.store
    record = (await store.list_keys())[0]
    capped = await store.update_key(record.id, KeyChanges(budget_nanos=BUDGET))
    gateway.services.directory.remember_key(capped)

    statuses = await burst(gateway, key, stream=False)

    metered = await records(gateway)
    spent = sum(r.cost_nanos for r in metered)
    assert {r.completion_tokens for r in metered} == {MAX_TOKENS}
    assert set(statuses) == {200, 429}
    assert spent == statuses.count(200) * WORST
    assert BUDGET <= spent < BUDGET + WORST, f"overshoot {spent - BUDGET} nanos"
    ledger = gateway.services.meter.ledger
    assert ledger.key_spent(record.id) == spent == ledger.spent(group.id)
