"""A key created on one instance works at once on another, and wrong keys stay bounded.

Two gateways share one SQLite database, as two instances share PostgreSQL. Instance B
refreshes its directory only every minute here, so a key created through instance A's
admin API a moment ago is unknown to B: B looks it up in the store. A burst of calls with
that key must all be served, after one look-up, however many arrive while it runs; a
flood of distinct wrong keys must still cost the store no more than the look-up budget.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from parley.app import create_app
from parley.domain.keys import digest
from parley.edge.runner import EdgeRunner
from parley.settings import Settings
from parley.store.sql import SqlStore, open_store
from tests.api.harness import Config, Gateway, default_config
from tests.upstreams.openai_compatible import FakeEngine

ADMIN = "admin-token-for-key-lookups-0123"
BURST = 100
LOOKUP_SECONDS = 0.2
"""How long B's store takes to answer a key look-up: a busy database, so the burst's
calls arrive while the first look-up is still running."""
BUDGET = 5
CHAT = {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]}


class SlowKeyLookups:
    """The real store, answering key look-ups slowly and counting them."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.find_key_calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def find_key(self, wanted: str) -> Any:
        self.find_key_calls += 1
        await asyncio.sleep(LOOKUP_SECONDS)
        return await self.store.find_key(wanted)


def shared_config(engine: FakeEngine, workdir: Path) -> Config:
    config = default_config(engine.base_url, workdir)
    config["admin"] = {"token": ADMIN}
    config["limits"] = {"cache_refresh_seconds": 60, "unknown_key_lookups_per_second": BUDGET}
    return config


async def start_with_store(config: Config, store: Any) -> Gateway:
    """``Gateway.start``, on a store the test holds."""
    gateway = Gateway(Settings.model_validate(config))
    app = create_app(gateway.settings, store=store)
    gateway.runner = EdgeRunner(
        app, gateway.settings.server, handler_cancellation=True, shutdown_timeout=1
    )
    await gateway.runner.setup()
    site = web.TCPSite(gateway.runner, "127.0.0.1", 0)
    await site.start()
    gateway.base_url = f"http://127.0.0.1:{gateway.runner.addresses[0][1]}"
    return gateway


@pytest.fixture
async def instances(
    engine: FakeEngine, tmp_path: Path
) -> AsyncIterator[tuple[Gateway, Gateway, SlowKeyLookups]]:
    config = shared_config(engine, tmp_path)
    first = await Gateway.start(config)
    store = await open_store(config["database"]["url"])
    counting = SlowKeyLookups(store)
    second = await start_with_store(config, counting)
    try:
        yield first, second, counting
    finally:
        await second.stop()
        await first.stop()


async def admin(gateway: Gateway, path: str, body: Any) -> Any:
    headers = {"Authorization": f"Bearer {ADMIN}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{gateway.base_url}/admin{path}", json=body, headers=headers) as reply,
    ):
        assert reply.status == 201, await reply.text()
        return await reply.json()


async def burst(gateway: Gateway, keys: list[str]) -> list[int]:
    """One chat call per key, all at once: their statuses."""
    connector = aiohttp.TCPConnector(limit=len(keys))
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(key: str) -> int:
            headers = {"Authorization": f"Bearer {key}"}
            async with session.post(
                f"{gateway.v1}/chat/completions", json=CHAT, headers=headers
            ) as reply:
                await reply.read()
                return reply.status

        return list(await asyncio.gather(*(one(key) for key in keys)))


async def test_a_burst_with_a_key_made_on_another_instance_is_served_after_one_lookup(
    instances: tuple[Gateway, Gateway, SlowKeyLookups],
) -> None:
    first, second, store = instances
    await admin(first, "/groups", {"name": "team"})
    key = (await admin(first, "/keys", {"group": "team"}))["key"]
    assert second.services.directory.cached_key(digest(key)) is None  # B has not seen it

    statuses = await burst(second, [key] * BURST)

    assert statuses == [200] * BURST
    assert store.find_key_calls == 1
    assert second.services.directory.lookups_refused == 0


async def test_a_flood_of_distinct_wrong_keys_stays_within_the_lookup_budget(
    instances: tuple[Gateway, Gateway, SlowKeyLookups],
) -> None:
    _, second, store = instances
    wrong = [f"pk-{secrets.token_urlsafe(32)}" for _ in range(BURST)]

    began = time.monotonic()
    statuses = await burst(second, wrong)
    elapsed = time.monotonic() - began

    assert statuses == [401] * BURST
    # one second's worth saved, refilled at BUDGET a second while the flood lasted
    assert store.find_key_calls <= BUDGET * (1 + elapsed)
    assert store.find_key_calls + second.services.directory.lookups_refused == BURST
