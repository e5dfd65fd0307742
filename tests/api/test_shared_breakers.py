"""Two gateways sharing Redis agree on a breaker: one opens it, the other skips the
channel; one closes it, the other tries the channel again. Without Redis, or with Redis
unreachable, each keeps its own."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from parley.runtime.circuit import State, Transition
from tests.api.harness import Config, Gateway, StartGateway, records, starting
from tests.api.test_resilience import MESSAGES, failures_on, state, two_channels
from tests.services import REDIS_URL, redis_unreachable
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

SICK = "sick:upstream-chat"
COOLDOWN = 2.0


@pytest.fixture
async def sick() -> AsyncIterator[FakeEngine]:
    async with FakeEngine(api_key="sk-channel-secret-0123456789") as running:
        yield running


def require_redis() -> None:
    """Skip (fail under ``PARLEY_REQUIRE_SERVICES=1``) when no Redis listens."""
    reason = redis_unreachable()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
async def start(
    engine: FakeEngine, sick: FakeEngine, tmp_path: Path
) -> AsyncIterator[StartGateway]:
    require_redis()
    prefix = f"parley-test-{secrets.token_hex(4)}"

    def config() -> Config:
        workdir = tmp_path / secrets.token_hex(4)  # one database per instance
        workdir.mkdir()
        settings = two_channels(sick.base_url, engine.base_url, workdir)
        settings["channels"][0]["breaker"] = {"cooldown_seconds": COOLDOWN}
        settings["redis"] = {"url": REDIS_URL, "prefix": prefix, "retry_seconds": 0.2}
        return settings

    async with starting(config) as go:
        yield go


async def until(gateway: Gateway, key: str, wanted: State) -> None:
    """Wait (3 s at most) for breaker ``key`` to be ``wanted``."""
    reached = asyncio.Event()

    def watch(change: Transition) -> None:
        if change.key == key and change.state == wanted:
            reached.set()

    gateway.services.breakers.transitions.append(watch)
    if state(gateway, key) != wanted:
        async with asyncio.timeout(3):
            await reached.wait()


async def connected(gateway: Gateway) -> None:
    shared = gateway.services.shared_breakers
    assert shared is not None
    async with asyncio.timeout(3):
        await shared.connected.wait()


async def chat(gateway: Gateway, key: str) -> Any:
    return await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)


async def test_two_instances_agree_on_a_breaker(start: StartGateway, sick: FakeEngine) -> None:
    one, two = await start(), await start()
    await connected(one)
    await connected(two)
    key_one = await one.key(await one.group("team"))
    key_two = await two.key(await two.group("team"))
    sick.behaviour = Behaviour(fail=503)
    for _ in range(5):
        await chat(one, key_one)
    assert state(one, SICK) == State.OPEN
    await until(two, SICK, State.OPEN)
    tried_by_two = failures_on(two, "sick")
    for _ in range(5):
        await chat(two, key_two)
    assert tried_by_two == []  # the second instance never paid for the sick channel
    assert {r.channel for r in await records(two)} == {"healthy"}

    sick.behaviour = Behaviour()
    await asyncio.sleep(COOLDOWN + 0.05)
    await chat(one, key_one)  # the first instance's probe succeeds
    assert state(one, SICK) == State.CLOSED
    await until(two, SICK, State.CLOSED)
    await chat(two, key_two)
    assert (await records(two))[-1].channel == "sick"


async def test_an_instance_that_starts_later_learns_an_open_breaker(
    start: StartGateway, sick: FakeEngine
) -> None:
    def long_cooldown(config: Config) -> None:
        config["channels"][0]["breaker"] = {"cooldown_seconds": 60}

    one = await start(long_cooldown)
    await connected(one)
    key_one = await one.key(await one.group("team"))
    sick.behaviour = Behaviour(fail=503)
    for _ in range(5):
        await chat(one, key_one)
    await asyncio.sleep(0.1)  # the write is a task of its own
    two = await start(long_cooldown)
    await connected(two)
    assert state(two, SICK) == State.OPEN


async def test_without_reachable_redis_each_instance_keeps_its_own(
    engine: FakeEngine, sick: FakeEngine, tmp_path: Path
) -> None:
    def config() -> Config:
        settings = two_channels(sick.base_url, engine.base_url, tmp_path)
        settings["redis"] = {"url": "redis://127.0.0.1:9/0", "retry_seconds": 0.2}
        return settings

    sick.behaviour = Behaviour(fail=503)
    async with starting(config) as go:
        gateway = await go()
        key = await gateway.key(await gateway.group("team"))
        for _ in range(6):
            await chat(gateway, key)
        assert state(gateway, SICK) == State.OPEN
        assert len(sick.requests) == 5


async def test_one_half_open_probe_across_instances(start: StartGateway, sick: FakeEngine) -> None:
    def slow_probe(config: Config) -> None:
        config["channels"][0]["timeouts"].update(first_token=3)  # a probe lease of 4 s

    one, two = await start(slow_probe), await start(slow_probe)
    await connected(one)
    await connected(two)
    key_one = await one.key(await one.group("team"))
    key_two = await two.key(await two.group("team"))
    sick.behaviour = Behaviour(fail=503)
    for _ in range(5):
        await chat(one, key_one)
    await until(two, SICK, State.OPEN)
    sick.behaviour = Behaviour(hang=1.5)  # the upstream recovered; the probe takes a while
    before = len(sick.requests)
    await asyncio.sleep(COOLDOWN + 0.05)
    # Both instances call on and on: one of them takes the probe's lease and lets its
    # probe through; while it is under way, every other call goes to the healthy channel.
    calls: list[asyncio.Task[Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 1.0
    while loop.time() < deadline:
        calls.append(loop.create_task(chat(one, key_one)))
        calls.append(loop.create_task(chat(two, key_two)))
        await asyncio.sleep(0.05)
    assert len(sick.requests) == before + 1, "one probe, whichever instance took it"
    await asyncio.gather(*calls)
    await until(one, SICK, State.CLOSED)
    await until(two, SICK, State.CLOSED)
