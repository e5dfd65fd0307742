"""Two gateways sharing Redis agree on a breaker: one opens it, the other skips the
channel; one closes it, the other tries the channel again. Without Redis, or with Redis
unreachable, each keeps its own."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
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


WAIT = 10.0
"""The longest wait for news from the other instance (it comes in milliseconds on a
quiet machine; the bound is for a loaded one, and costs nothing when news comes)."""


async def until(gateway: Gateway, key: str, wanted: State) -> None:
    """Wait (``WAIT`` at most) for breaker ``key`` to be ``wanted``."""
    reached = asyncio.Event()

    def watch(change: Transition) -> None:
        if change.key == key and change.state == wanted:
            reached.set()

    gateway.services.breakers.transitions.append(watch)
    if state(gateway, key) != wanted:
        async with asyncio.timeout(WAIT):
            await reached.wait()


async def connected(gateway: Gateway) -> None:
    shared = gateway.services.shared_breakers
    assert shared is not None
    async with asyncio.timeout(WAIT):
        await shared.connected.wait()


async def probed(gateway: Gateway, key: str) -> None:
    """Call until a call of ``gateway``'s was the probe that closed the sick breaker.

    The instance that opened it holds the probe's lease from just before the cool-down
    ends until ``LEASE_GRACE_SECONDS`` after; a call that comes later (a loaded machine)
    goes to the healthy channel, and the lease is taken again for the next one."""
    async with asyncio.timeout(WAIT):
        while state(gateway, SICK) != State.CLOSED:
            await chat(gateway, key)


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
    await probed(one, key_one)  # the first instance's probe succeeds
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
    two = await start(long_cooldown)
    await connected(two)
    await until(two, SICK, State.OPEN)  # read when it connects (or published, if later)


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
        config["channels"][0]["timeouts"].update(first_token=6)  # a probe lease of 7 s

    one, two = await start(slow_probe), await start(slow_probe)
    await connected(one)
    await connected(two)
    key_one = await one.key(await one.group("team"))
    key_two = await two.key(await two.group("team"))
    sick.behaviour = Behaviour(fail=503)
    for _ in range(5):
        await chat(one, key_one)
    await until(two, SICK, State.OPEN)
    sick.behaviour = Behaviour(hang=2.5)  # the upstream recovered; the probe takes a while
    before = len(sick.requests)
    await asyncio.sleep(COOLDOWN + 0.05)
    # Both instances call on and on: one of them takes the probe's lease and lets its
    # probe through; while it is under way, every other call goes to the healthy channel.
    calls: list[asyncio.Task[Any]] = []
    loop = asyncio.get_running_loop()

    async def calling(until: Callable[[], bool]) -> None:
        while not until():
            calls.append(loop.create_task(chat(one, key_one)))
            calls.append(loop.create_task(chat(two, key_two)))
            await asyncio.sleep(0.05)

    async with asyncio.timeout(WAIT):  # until the probe has reached the upstream
        await calling(lambda: len(sick.requests) > before)
    probing = loop.time()  # the probe hangs 2.5 s; calls go on for 1 s of it
    await calling(lambda: loop.time() > probing + 1.0)
    assert len(sick.requests) == before + 1, "one probe, whichever instance took it"
    await asyncio.gather(*calls)
    await until(one, SICK, State.CLOSED)
    await until(two, SICK, State.CLOSED)


async def test_the_openers_lease_covers_a_late_probe_and_goes_back_unused(
    start: StartGateway, sick: FakeEngine
) -> None:
    """The instance that opened a breaker holds the probe's lease from just before the
    cool-down ends: long enough for a probe started at the end of the grace to finish
    without that process stretching it in time, and given back when no probe came."""
    from redis.asyncio import Redis

    from parley.runtime.shared_breakers import LEASE_GRACE_SECONDS

    one = await start()
    await connected(one)
    key_one = await one.key(await one.group("team"))
    sick.behaviour = Behaviour(fail=503)
    for _ in range(5):
        await chat(one, key_one)
    breaker = one.services.breakers.find(SICK)
    assert breaker is not None and breaker.state == State.OPEN
    lease = f"{one.settings.redis.prefix}:probe:{SICK}"
    client = Redis.from_url(REDIS_URL)
    try:
        async with asyncio.timeout(COOLDOWN + WAIT):  # Redis is polled: it tells no one
            left = await client.pttl(lease)
            while left < 0:
                await asyncio.sleep(0.02)
                left = await client.pttl(lease)
        assert left / 1000 > breaker.probe_lease  # the grace and a whole probe's lease
        assert left / 1000 <= LEASE_GRACE_SECONDS + 0.1 + breaker.probe_lease
        async with asyncio.timeout(WAIT):  # no call came: given back after the grace
            held = await client.exists(lease)
            while held:
                await asyncio.sleep(0.05)
                held = await client.exists(lease)
        assert state(one, SICK) == State.OPEN
    finally:
        await client.aclose()
