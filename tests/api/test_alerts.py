"""Alerts through the real app, delivered to a real HTTP receiver: signed with the
webhook's secret, retried after a failure, audited once per episode and shown on the
overview; budgets crossing their thresholds raise one alert per threshold."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from tests.api.admin_client import ADMIN, call
from tests.api.harness import Gateway
from tests.api.test_admin_security import session_cookie
from tests.services import REDIS_URL, redis_unreachable
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

SECRET = "whsec-0123456789abcdef"
WAIT_SECONDS = 20.0
"""A bound on waiting for a delivery (each takes milliseconds): a hang fails."""
ASK = {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]}


@dataclass
class Receiver:
    """A webhook receiver: fails the first ``failures`` posts to each path with a 500."""

    failures: int = 1
    posts: dict[str, list[tuple[dict[str, str], bytes, int]]] = field(default_factory=dict)
    accepted: asyncio.Condition = field(default_factory=asyncio.Condition)
    base_url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        seen = self.posts.setdefault(request.path, [])
        status = 500 if len(seen) < self.failures else 200
        seen.append((dict(request.headers), body, status))
        async with self.accepted:
            self.accepted.notify_all()
        return web.Response(status=status)

    def taken(self, path: str) -> list[Any]:
        return [orjson.loads(body) for _, body, status in self.posts.get(path, []) if status == 200]

    async def until(self, path: str, count: int = 1) -> None:
        async with asyncio.timeout(WAIT_SECONDS), self.accepted:
            await self.accepted.wait_for(lambda: len(self.taken(path)) >= count)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    app = web.Application()
    app.router.add_post("/{path:.*}", found.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    found.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield found
    await runner.cleanup()


def alerting(receiver: Receiver, **extra: Any) -> Any:
    def tweak(config: dict[str, Any]) -> None:
        config["admin"] = {"token": ADMIN}
        config["channels"][0]["breaker"] = {"failures": 1, "cooldown_seconds": 60}
        config["alerts"] = {
            "webhooks": [
                {"url": f"{receiver.base_url}/json", "secret": SECRET, "format": "json"},
                {"url": f"{receiver.base_url}/slack/T000/B000/token", "format": "slack"},
            ],
            "backoff_seconds": 0.01,
            "check_seconds": 0.02,
            **extra,
        }

    return tweak


async def test_a_breaker_opening_is_posted_signed_retried_and_audited_once(
    start_gateway: Any, engine: FakeEngine, receiver: Receiver
) -> None:
    engine.behaviour = Behaviour(fail=503)
    gateway: Gateway = await start_gateway(alerting(receiver))
    key = await gateway.key(await gateway.group("team"))
    assert (await call(gateway, "POST", "/v1/chat/completions", token=key, body=ASK))[0] == 502

    await receiver.until("/json")
    await receiver.until("/slack/T000/B000/token")
    posts = receiver.posts["/json"]
    assert [status for _, _, status in posts] == [500, 200]  # failed once, then retried
    assert posts[0][1] == posts[1][1]  # the same body, the same signature
    for headers, body, _ in posts:
        wanted = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-Parley-Signature"], wanted)
    alert = receiver.taken("/json")[0]
    assert alert["object"] == "alert" and alert["kind"] == "breaker.open"
    assert alert["subject"] == "engine:upstream-chat"
    assert "503" in alert["message"]
    slack = receiver.taken("/slack/T000/B000/token")[0]
    assert set(slack) == {"text"} and "engine:upstream-chat" in slack["text"]
    assert "X-Parley-Signature" not in receiver.posts["/slack/T000/B000/token"][0][0]

    for _ in range(3):  # more failures in the same episode: no second alert
        await call(gateway, "POST", "/v1/chat/completions", token=key, body=ASK)
    status, audit = await call(gateway, "GET", "/admin/audit?action=alert.breaker.open")
    assert status == 200, audit
    assert [(e["actor"], e["target"]) for e in audit["data"]] == [
        ("alerts", "engine:upstream-chat")
    ]
    status, overview = await call(gateway, "GET", "/admin/overview")
    assert [a["kind"] for a in overview["alerts"]["active"]] == ["breaker.open"]
    assert len(receiver.taken("/json")) == 1


async def test_a_group_past_its_budget_raises_one_alert_per_threshold(
    start_gateway: Any, receiver: Receiver
) -> None:
    gateway: Gateway = await start_gateway(alerting(receiver))
    key = await gateway.key(await gateway.group("team", budget_nanos=1))
    assert (await call(gateway, "POST", "/v1/chat/completions", token=key, body=ASK))[0] == 200

    await receiver.until("/json", 2)
    alerts = sorted(receiver.taken("/json"), key=lambda alert: alert["subject"])
    assert [(a["kind"], a["subject"], a["severity"]) for a in alerts] == [
        ("budget.group", "group team at 100%", "critical"),
        ("budget.group", "group team at 80%", "warning"),
    ]
    status, audit = await call(gateway, "GET", "/admin/audit?action=alert.budget.group")
    assert sorted(e["target"] for e in audit["data"]) == [
        "group team at 100%",
        "group team at 80%",
    ]
    status, overview = await call(gateway, "GET", "/admin/overview")
    assert status == 200, overview
    assert {a["subject"] for a in overview["alerts"]["active"]} == {
        "group team at 80%",
        "group team at 100%",
    }

    cookie = await session_cookie(gateway, {})
    headers = {"Cookie": f"parley_admin={cookie.value}"}
    async with (
        aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session,
        session.get(f"{gateway.base_url}/admin/", headers=headers) as page,
    ):
        html = await page.text()
    assert page.status == 200
    assert 'data-alert="budget.group"' in html
    assert "Group team has spent 100% of its budget" in html


async def test_a_spike_of_refusals_raises_one_alert(start_gateway: Any, receiver: Receiver) -> None:
    gateway: Gateway = await start_gateway(alerting(receiver, refusals_per_minute=1))
    key = await gateway.key(await gateway.group("team", rpm=1))
    statuses = [
        (await call(gateway, "POST", "/v1/chat/completions", token=key, body=ASK))[0]
        for _ in range(4)
    ]
    assert statuses == [200, 429, 429, 429]

    await receiver.until("/json")
    alert = receiver.taken("/json")[0]
    assert alert["kind"] == "refusals.spike" and alert["subject"] == "refusals"
    status, audit = await call(gateway, "GET", "/admin/audit?action=alert.refusals.spike")
    assert status == 200 and len(audit["data"]) == 1


async def test_with_redis_an_alert_every_instance_raises_is_posted_once(
    start_gateway: Any, receiver: Receiver
) -> None:
    reason = redis_unreachable()
    if reason is not None:
        pytest.skip(reason)
    prefix = f"parley-test-{secrets.token_hex(4)}"

    def shared(config: dict[str, Any]) -> None:
        alerting(receiver)(config)
        config["redis"] = {"url": REDIS_URL, "prefix": prefix}

    instances: list[Gateway] = [await start_gateway(shared), await start_gateway(shared)]
    for gateway in instances:
        alerts = gateway.services.alerts
        assert alerts is not None and alerts.claim is not None
        assert alerts.raise_alert("usage.writer_behind", "usage writer", "behind", "critical")
    for gateway in instances:
        alerts = gateway.services.alerts
        assert alerts is not None
        async with asyncio.timeout(WAIT_SECONDS), alerts.settled:
            await alerts.settled.wait_for(lambda: alerts.handled >= 1)  # noqa: B023
    await receiver.until("/json")
    # both instances share one database here: the audit log holds every instance's entries
    status, audit = await call(instances[0], "GET", "/admin/audit?action=alert.usage.writer_behind")
    assert status == 200, audit
    assert len(audit["data"]) == 1
    assert len(receiver.taken("/json")) == 1


async def test_a_channel_its_health_checks_find_down_is_one_alert(
    start_gateway: Any, engine: FakeEngine, receiver: Receiver
) -> None:
    engine.behaviour = Behaviour(fail=500)

    def checked(config: dict[str, Any]) -> None:
        alerting(receiver)(config)
        config["channels"][0]["breaker"] = {"enabled": False}
        config["channels"][0]["health"] = {"interval_seconds": 0.02}

    gateway: Gateway = await start_gateway(checked)
    await receiver.until("/json")
    alert = receiver.taken("/json")[0]
    assert (alert["kind"], alert["subject"], alert["severity"]) == (
        "channel.down",
        "engine",
        "critical",
    )
    assert "500" in alert["message"]
    checks = gateway.services.health_checks
    assert checks is not None

    def five_down() -> bool:
        last = checks.last.get("engine")
        return last is not None and last.failed_in_a_row >= 5

    async with asyncio.timeout(WAIT_SECONDS), checks.checked:
        await checks.checked.wait_for(five_down)
    status, audit = await call(gateway, "GET", "/admin/audit?action=alert.channel.down")
    assert status == 200 and [e["target"] for e in audit["data"]] == ["engine"]
    assert len(receiver.taken("/json")) == 1


async def test_a_usage_writer_behind_is_an_alert(start_gateway: Any, receiver: Receiver) -> None:
    def slow_writer(config: dict[str, Any]) -> None:
        alerting(receiver, writer_backlog=0.1)(config)
        config["usage"] = {**config.get("usage", {}), "queue_size": 10, "flush_seconds": 3600}

    gateway: Gateway = await start_gateway(slow_writer)
    key = await gateway.key(await gateway.group("team"))
    assert (await call(gateway, "POST", "/v1/chat/completions", token=key, body=ASK))[0] == 200

    await receiver.until("/json")  # one record waits, a tenth of the queue
    alert = receiver.taken("/json")[0]
    assert (alert["kind"], alert["severity"]) == ("usage.writer_behind", "critical")
    assert alert["detail"]["backlog"] >= 1
