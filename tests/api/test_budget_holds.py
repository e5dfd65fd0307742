"""A budget hold ends exactly once, whatever ends the call.

Each call here holds the whole budget (its worst case: ``max_tokens`` at the output
price), so while it runs no other call of the group is admitted, and once it has ended,
however it ended, the group has room again. A hold that leaked would lock the group out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from parley.domain.groups import Group
from tests.api.harness import Config, Gateway, StartGateway, records
from tests.api.test_runner import install_bug
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

MAX_TOKENS = 100
BUDGET = MAX_TOKENS * 10_000
"""Exactly one call's worst case at ``output_per_1k: 0.01`` dollars."""
BODY: dict[str, Any] = {
    "model": "chat-large",
    "messages": [{"role": "user", "content": "hello there"}],
    "max_tokens": MAX_TOKENS,
}


def priced_on_output(config: Config) -> None:
    config["models"][0]["prices"] = {"input_per_1k": "0", "output_per_1k": "0.01"}


async def room(gateway: Gateway, group: Group) -> bool:
    """Whether the group's budget admits a call now (a hold of nothing, kept nowhere)."""
    budget = gateway.services.meter.ledger.budget(group)
    assert budget is not None
    return await gateway.services.limiter.hold_spend(budget, "probe", 0)


async def wait_for_upstream(engine: FakeEngine) -> None:
    async with asyncio.timeout(5):
        while not engine.requests:  # noqa: ASYNC110
            await asyncio.sleep(0.01)


Ending = Callable[[Gateway, FakeEngine, aiohttp.ClientSession, Group], Awaitable[None]]


async def succeeds(
    gateway: Gateway, engine: FakeEngine, s: aiohttp.ClientSession, g: Group
) -> None:
    async with s.post(f"{gateway.v1}/chat/completions", json=BODY) as reply:
        assert reply.status == 200


async def succeeds_streamed(
    gateway: Gateway, engine: FakeEngine, s: aiohttp.ClientSession, g: Group
) -> None:
    async with s.post(f"{gateway.v1}/chat/completions", json={**BODY, "stream": True}) as reply:
        assert reply.status == 200
        await reply.read()


async def upstream_fails(
    gateway: Gateway, engine: FakeEngine, s: aiohttp.ClientSession, g: Group
) -> None:
    engine.behaviour = Behaviour(fail=500)
    async with s.post(f"{gateway.v1}/chat/completions", json=BODY) as reply:
        assert reply.status == 502


async def adapter_bug(
    gateway: Gateway, engine: FakeEngine, s: aiohttp.ClientSession, g: Group
) -> None:
    install_bug(gateway, fail_after_batches=2)
    async with s.post(f"{gateway.v1}/chat/completions", json={**BODY, "stream": True}) as reply:
        await reply.read()


async def caller_leaves(
    gateway: Gateway, engine: FakeEngine, s: aiohttp.ClientSession, g: Group
) -> None:
    engine.behaviour = Behaviour(hang=5.0)
    call = asyncio.create_task(s.post(f"{gateway.v1}/chat/completions", json=BODY))
    await wait_for_upstream(engine)
    assert not await room(gateway, g)  # the call holds the whole budget
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)


async def caller_leaves_a_stream(
    gateway: Gateway, engine: FakeEngine, s: aiohttp.ClientSession, g: Group
) -> None:
    engine.behaviour = Behaviour(delay=0.05)
    body = {**BODY, "stream": True}
    async with s.post(f"{gateway.v1}/chat/completions", json=body) as reply:
        await reply.content.readline()
        assert not await room(gateway, g)
        reply.close()


async def shutdown_ends_a_stream(
    gateway: Gateway, engine: FakeEngine, s: aiohttp.ClientSession, g: Group
) -> None:
    engine.behaviour = Behaviour(delay=0.05)
    async with s.post(f"{gateway.v1}/chat/completions", json={**BODY, "stream": True}) as reply:
        await reply.content.readline()
        assert await gateway.services.in_flight.end_all() == 1
        await reply.read()


async def shutdown_ends_a_waiting_call(
    gateway: Gateway, engine: FakeEngine, s: aiohttp.ClientSession, g: Group
) -> None:
    engine.behaviour = Behaviour(hang=5.0)
    call = asyncio.create_task(s.post(f"{gateway.v1}/chat/completions", json=BODY))
    await wait_for_upstream(engine)
    assert await gateway.services.in_flight.end_all() == 1
    reply = await call
    assert reply.status == 503
    reply.release()


@pytest.mark.parametrize(
    "ending",
    [
        succeeds,
        succeeds_streamed,
        upstream_fails,
        adapter_bug,
        caller_leaves,
        caller_leaves_a_stream,
        shutdown_ends_a_stream,
        shutdown_ends_a_waiting_call,
    ],
)
async def test_a_hold_ends_once_whatever_ends_the_call(
    start_gateway: StartGateway, engine: FakeEngine, ending: Ending
) -> None:
    gateway = await start_gateway(priced_on_output)
    group = await gateway.group("team", budget_nanos=BUDGET)
    headers = {"Authorization": f"Bearer {await gateway.key(group)}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        await ending(gateway, engine, session, group)
    async with asyncio.timeout(5):
        while not await records(gateway):  # noqa: ASYNC110 (records() drains the meter's tasks)
            await asyncio.sleep(0.05)
    (record,) = await records(gateway)
    assert record.cost_nanos < BUDGET
    assert await room(gateway, group)


async def test_a_call_the_rates_refuse_gives_its_hold_back_at_once(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(priced_on_output)
    group = await gateway.group("team", rpm=1, budget_nanos=BUDGET)
    headers = {"Authorization": f"Bearer {await gateway.key(group)}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        for expected in (200, 429):
            async with session.post(f"{gateway.v1}/chat/completions", json=BODY) as reply:
                assert reply.status == expected
                if expected == 429:
                    assert (await reply.json())["error"]["code"] == "rate_limit_exceeded"
    await gateway.services.tasks.drain(seconds=5)
    assert await room(gateway, group)
