"""The database goes away (or hangs) under a running gateway, and comes back.

PostgreSQL is shared, so the outage is a ``TcpProxy`` between the gateway and it: cutting
the proxy resets every pooled connection and refuses new ones (``ConnectionRefusedError``
inside asyncpg), exactly what a stopped database looks like. While it is away, what needs
the database (billing usage, the admin API) answers a clean 503 envelope, calls with a
known key go on and their usage queues; once it is back, the queue is written again on
the writer's next attempt, at most a second away (no back-off that grows with the
outage), and calls the full queue refused pass again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from parley.runtime.writer import RETRY_SECONDS
from tests.api.admin_client import browser_session, form_token, login
from tests.api.harness import Gateway, default_config
from tests.process.conftest import PostgresDatabase
from tests.process.proxy import TcpProxy
from tests.services import POSTGRES_HOST, POSTGRES_PORT, postgres_through
from tests.upstreams.openai_compatible import FakeEngine

pytestmark = pytest.mark.postgres

ADMIN = "admin-token-for-outage-tests-0123"
QUEUE_SIZE = 3
HUNG_TIMEOUT = 1.0
"""``database.timeout_seconds`` here: how long a statement may hang before it fails."""
BACK_WITHIN = 10.0
"""Generous: the writer retries every second at most; the old back-off reached 30 s."""
UNAVAILABLE = {
    "error": {
        "message": "The database is unavailable right now; try again shortly.",
        "type": "server_error",
        "param": None,
        "code": "service_unavailable",
    }
}


@pytest.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    async with TcpProxy(POSTGRES_PORT, POSTGRES_HOST) as running:
        yield running


@pytest.fixture
async def gateway(
    proxy: TcpProxy, postgres_db: PostgresDatabase, tmp_path: Path
) -> AsyncIterator[Gateway]:
    async with FakeEngine(api_key="sk-channel-secret-0123456789") as engine:
        config: dict[str, Any] = default_config(engine.base_url, tmp_path)
        config["database"] = {"url": postgres_through(postgres_db.url, "127.0.0.1", proxy.port)}
        config["admin"] = {"token": ADMIN}
        config["database"]["timeout_seconds"] = HUNG_TIMEOUT
        config["usage"] |= {"queue_size": QUEUE_SIZE, "flush_seconds": 0.05}
        running = await Gateway.start(config)
        try:
            yield running
        finally:
            proxy.thaw()
            await proxy.restore()  # so the shutdown can write what is queued
            await running.stop()


async def request(
    gateway: Gateway, method: str, path: str, token: str, body: Any = None
) -> tuple[int, Any, dict[str, str]]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session,
        session.request(method, f"{gateway.base_url}{path}", json=body) as response,
    ):
        headers = {name.lower(): value for name, value in response.headers.items()}
        return response.status, await response.json(), headers


async def chat(gateway: Gateway, key: str) -> int:
    body = {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]}
    status, _, _ = await request(gateway, "POST", "/v1/chat/completions", key, body)
    return status


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + BACK_WITHIN
    while not await check():
        assert time.monotonic() < deadline, f"{what}: not within {BACK_WITHIN:g}s"
        await asyncio.sleep(0.05)


async def test_billing_and_admin_answer_503_while_the_database_is_down(
    gateway: Gateway, proxy: TcpProxy
) -> None:
    key = await gateway.key(await gateway.group("team", rpm=1000))
    assert await chat(gateway, key) == 200
    assert (await request(gateway, "GET", "/v1/dashboard/billing/usage", key))[0] == 200

    await proxy.cut()

    for method, path, token, body in (
        ("GET", "/v1/dashboard/billing/usage", key, None),
        ("GET", "/admin/groups", ADMIN, None),
        ("POST", "/admin/groups", ADMIN, {"name": "other"}),
        ("GET", "/admin/keys?group=team", ADMIN, None),
        ("POST", "/admin/keys", ADMIN, {"group": "team"}),
        ("PATCH", "/admin/groups/team", ADMIN, {"rpm": 5}),
        ("DELETE", "/admin/keys/1", ADMIN, None),
    ):
        status, reply, headers = await request(gateway, method, path, token, body)
        assert (status, reply) == (503, UNAVAILABLE), (method, path)
        assert headers["retry-after"] == "1"
    status, _, headers = await request(gateway, "GET", "/v1/dashboard/billing/usage", key)
    assert headers["x-ratelimit-limit-requests"] == "1000"  # the reply still reports limits
    # what needs no database goes on: a known key, the quota from memory
    assert await chat(gateway, key) == 200
    assert (await request(gateway, "GET", "/v1/dashboard/billing/quota", key))[0] == 200

    await proxy.restore()
    assert (await request(gateway, "GET", "/admin/groups", ADMIN))[0] == 200
    await eventually(lambda: _written(gateway, 2), "the usage queued during the outage")


async def test_the_dashboard_shows_a_page_while_the_database_is_down(
    gateway: Gateway, proxy: TcpProxy
) -> None:
    """A browser gets an HTML page saying what is wrong (the admin API, the envelope)."""
    base = gateway.base_url
    async with browser_session() as session:
        assert (await login(session, base, ADMIN)).status == 303
        csrf = await form_token(session, base)

        await proxy.cut()

        for method, path, form in (
            ("GET", "/admin/", None),
            ("GET", "/admin/ui/groups", None),
            ("POST", "/admin/ui/groups", {"csrf": csrf, "name": "other"}),
        ):
            async with session.request(method, f"{base}{path}", data=form) as page:
                assert page.status == 503, (method, path)
                assert page.content_type == "text/html", (method, path)
                assert page.headers["retry-after"] == "1"
                text = await page.text()
                assert "<h1>Unavailable</h1>" in text and "database is unavailable" in text
                assert page.headers["X-Frame-Options"] == "DENY"
    status, reply, _ = await request(gateway, "GET", "/admin/groups", ADMIN)
    assert (status, reply) == (503, UNAVAILABLE)


async def _written(gateway: Gateway, count: int) -> bool:
    return await gateway.services.store.count_usage() == count


async def test_writing_resumes_within_a_retry_interval_once_the_database_is_back(
    gateway: Gateway, proxy: TcpProxy
) -> None:
    key = await gateway.key(await gateway.group("team"))
    writer = gateway.services.meter.writer
    await proxy.cut()
    for _ in range(QUEUE_SIZE):
        assert await chat(gateway, key) == 200
    await eventually(lambda: _failing(gateway), "a failed write")
    assert writer.next_attempt_seconds <= RETRY_SECONDS
    # the queue is full: calls are refused until it drains
    status, reply, _ = await request(
        gateway,
        "POST",
        "/v1/chat/completions",
        key,
        {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert status == 503
    assert reply["error"]["code"] == "service_unavailable"
    await asyncio.sleep(3 * RETRY_SECONDS)  # several failed attempts: no back-off builds up
    assert writer.next_attempt_seconds <= RETRY_SECONDS

    await proxy.restore()
    await eventually(lambda: _written(gateway, QUEUE_SIZE), "the queued usage")
    assert writer.backlog == 0
    assert not writer.failing
    assert await chat(gateway, key) == 200


async def _failing(gateway: Gateway) -> bool:
    return gateway.services.meter.writer.failing


async def test_a_hung_database_fails_calls_after_its_timeout_instead_of_holding_them(
    gateway: Gateway, proxy: TcpProxy
) -> None:
    """Connections accepted, nothing answered: without a statement timeout a billing
    call, the usage writer and shutdown waited for ever."""
    key = await gateway.key(await gateway.group("team"))
    assert await chat(gateway, key) == 200
    proxy.freeze()

    usage = request(gateway, "GET", "/v1/dashboard/billing/usage", key)
    status, reply, _ = await asyncio.wait_for(usage, BACK_WITHIN)  # a hang guard
    assert (status, reply) == (503, UNAVAILABLE)
    assert await chat(gateway, key) == 200  # a known key needs no database
    await eventually(lambda: _failing(gateway), "a write that timed out")

    proxy.thaw()
    await eventually(lambda: _written(gateway, 2), "the usage queued while it hung")
    assert (await request(gateway, "GET", "/v1/dashboard/billing/usage", key))[0] == 200
