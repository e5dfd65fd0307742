"""Scheduled health checks through the real app: a down upstream reads "down" with its
error, its breaker opens from the checks alone, a stored channel is disabled after N
failed checks and enabled again when they pass (both audited once), an operator's
disabled channel is left alone, and no check is billed to any group."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from cryptography.fernet import Fernet

from tests.api.admin_client import ADMIN, call
from tests.api.harness import Gateway
from tests.api.test_admin_security import session_cookie
from tests.services import REDIS_URL, redis_unreachable
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

SPARE_KEY = "sk-spare-channel-credential-42"
ADMIN_SETTINGS = {"token": ADMIN, "secret_keys": [Fernet.generate_key().decode()]}
WAIT_SECONDS = 20.0
"""A bound on waiting for the checks (each takes milliseconds): a hang fails, it is not
a measurement."""


def checked_every(interval: float, **health: Any) -> Callable[[dict[str, Any]], None]:
    def tweak(config: dict[str, Any]) -> None:
        config["admin"] = ADMIN_SETTINGS
        channel = config["channels"][0]
        channel["health"] = {"interval_seconds": interval, **health}
        channel["breaker"] = {"failures": 2, "cooldown_seconds": 60}

    return tweak


async def until(gateway: Gateway, done: Callable[[], bool]) -> None:
    """Wait (on the checker's notifications, not on a clock) until ``done()`` holds."""
    checks = gateway.services.health_checks
    assert checks is not None
    async with asyncio.timeout(WAIT_SECONDS), checks.checked:
        await checks.checked.wait_for(done)


def last_check(gateway: Gateway, channel: str) -> Any:
    checks = gateway.services.health_checks
    assert checks is not None
    return checks.last.get(channel)


def failed_in_a_row(gateway: Gateway, channel: str, count: int) -> Callable[[], bool]:
    def done() -> bool:
        found = last_check(gateway, channel)
        return found is not None and found.failed_in_a_row >= count

    return done


def passed(gateway: Gateway, channel: str) -> Callable[[], bool]:
    def done() -> bool:
        found = last_check(gateway, channel)
        return found is not None and found.ok

    return done


async def test_a_down_upstream_reads_down_and_its_breakers_open_without_any_call(
    start_gateway: Any, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(fail=503)
    gateway: Gateway = await start_gateway(checked_every(0.02))
    await until(gateway, failed_in_a_row(gateway, "engine", 2))

    status, view = await call(gateway, "GET", "/admin/channels/engine")
    assert status == 200, view
    assert view["health"]["state"] == "down"
    assert "503" in view["health"]["down_reason"]
    assert view["health"]["calls"] == 0  # no caller's traffic at all
    models = {found["model"]: found for found in view["circuit"]["models"]}
    assert models["upstream-chat"]["state"] == "open"
    assert models["vision-small"]["state"] == "open"
    assert models["upstream-chat"]["last_error"]
    last = view["check"]["last"]
    assert view["check"]["enabled"] and last["down"] and not last["ok"]
    assert {m["model"]: m["status"] for m in last["models"]} == {
        "chat-large": 503,
        "vision-small": 503,
    }
    assert all(body.body["max_tokens"] == 1 for body in engine.requests)

    cookie = await session_cookie(gateway, {})
    headers = {"Cookie": f"parley_admin={cookie.value}"}
    async with (
        aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session,
        session.get(f"{gateway.base_url}/admin/ui/channels/engine", headers=headers) as page,
    ):
        html = await page.text()
        async with session.get(f"{gateway.base_url}/admin/ui/channels", headers=headers) as listed:
            listing = await listed.text()
    assert page.status == 200 and listed.status == 200
    assert '<span class="pill state-down">down</span>' in listing
    assert '<span class="pill state-down">down</span>' in html
    assert "Fake engine failure (status 503)" in html

    engine.behaviour = Behaviour()
    await until(gateway, passed(gateway, "engine"))
    status, view = await call(gateway, "GET", "/admin/channels/engine")
    assert view["health"]["state"] != "down" and view["health"]["down_reason"] is None
    assert view["circuit"]["state"] == "closed"
    assert {found["state"] for found in view["circuit"]["models"]} == {"closed"}


async def test_checks_are_kept_in_the_history_and_cost_no_group_anything(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway: Gateway = await start_gateway(checked_every(0.02))
    await gateway.key(await gateway.group("team"))
    await until(gateway, passed(gateway, "engine"))
    engine.behaviour = Behaviour(fail=500)
    await until(gateway, failed_in_a_row(gateway, "engine", 1))

    status, history = await call(gateway, "GET", "/admin/channels/engine/history")
    assert status == 200, history
    checks = [event for event in history["data"] if event["kind"] == "check"]
    assert {event["actor"] for event in checks} == {"health-check"}
    assert {event["state"] for event in checks} == {"ok", "failed"}
    assert {event["status"] for event in checks} == {200, 500}

    await gateway.flush_usage()
    assert await gateway.usage_count() == 0  # not metered: no request line, no spend
    status, overview = await call(gateway, "GET", "/admin/overview")
    assert overview["today"]["requests"] == 0


def spare(engine: FakeEngine, **health: Any) -> dict[str, Any]:
    return {
        "name": "spare",
        "type": "openai",
        "base_url": engine.base_url,
        "api_key": SPARE_KEY,
        "models": [{"name": "unserved", "upstream": "spare-model"}],
        "health": health,
    }


def stored(gateway: Gateway, name: str) -> Any:
    return next(found for found in gateway.services.channels.stored if found.name == name)


async def audited(gateway: Gateway, action: str) -> list[dict[str, Any]]:
    status, page = await call(gateway, "GET", f"/admin/audit?action={action}&target=spare")
    assert status == 200, page
    return list(page["data"])


async def test_a_stored_channel_is_disabled_after_n_failed_checks_and_enabled_again(
    start_gateway: Any,
) -> None:
    gateway: Gateway = await start_gateway(lambda c: c.update(admin=ADMIN_SETTINGS))
    key = await gateway.key(await gateway.group("team"))
    async with FakeEngine(api_key=SPARE_KEY) as upstream:
        upstream.behaviour = Behaviour(fail=502)
        body = spare(upstream, interval_seconds=0.02, disable_after=3)
        status, created = await call(gateway, "POST", "/admin/channels", body=body)
        assert status == 201, created
        assert created["check"]["disable_after"] == 3

        await until(gateway, lambda: stored(gateway, "spare").disabled_at is not None)
        status, view = await call(gateway, "GET", "/admin/channels/spare")
        assert view["disabled"] and not view["serving"]
        assert view["disabled_by"] == "health-check"
        ask = {"model": "unserved", "messages": [{"role": "user", "content": "hi"}]}
        assert (await call(gateway, "POST", "/v1/chat/completions", token=key, body=ask))[0] == 503

        # still checked while disabled: more failures, and still one audit entry
        await until(gateway, failed_in_a_row(gateway, "spare", 6))
        disables = await audited(gateway, "channel.disable")
        assert len(disables) == 1
        assert disables[0]["actor"] == "health-check"
        assert disables[0]["detail"]["failed_checks"] == 3
        assert "502" in disables[0]["detail"]["error"]

        upstream.behaviour = Behaviour()
        await until(gateway, lambda: stored(gateway, "spare").disabled_at is None)
        status, view = await call(gateway, "GET", "/admin/channels/spare")
        assert not view["disabled"] and view["serving"] and view["disabled_by"] is None
        enables = await audited(gateway, "channel.enable")
        assert [entry["actor"] for entry in enables] == ["health-check"]
        assert (await call(gateway, "POST", "/v1/chat/completions", token=key, body=ask))[0] == 200


async def test_a_channel_an_operator_disabled_is_never_checked_nor_enabled(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway: Gateway = await start_gateway(checked_every(0.02))
    async with FakeEngine(api_key=SPARE_KEY) as upstream:
        upstream.behaviour = Behaviour(fail=502)
        body = spare(upstream, interval_seconds=0.02, disable_after=1)
        assert (await call(gateway, "POST", "/admin/channels", body=body))[0] == 201
        await until(gateway, lambda: stored(gateway, "spare").disabled_by == "health-check")
        # the operator takes it over: disabled by them, it is theirs to enable
        await call(gateway, "POST", "/admin/channels/spare/enable")
        await call(gateway, "POST", "/admin/channels/spare/disable")
        assert stored(gateway, "spare").disabled_by not in (None, "health-check")
        upstream.behaviour = Behaviour()
        seen = len(upstream.requests)

        # the config file's channel is checked five more times meanwhile
        checks = gateway.services.health_checks
        assert checks is not None
        start = last_check(gateway, "engine").at
        count = 0

        def five_more() -> bool:
            nonlocal count, start
            found = last_check(gateway, "engine")
            if found is not None and found.at > start:
                count, start = count + 1, found.at
            return count >= 5

        await until(gateway, five_more)
        assert stored(gateway, "spare").disabled_at is not None
        assert len(upstream.requests) <= seen + 1  # at most a check already under way
        enables = await audited(gateway, "channel.enable")
        assert len(enables) == 1 and enables[0]["actor"] != "health-check"


async def test_with_redis_one_instance_checks_a_channel_per_interval(
    start_gateway: Any,
) -> None:
    """Two instances sharing Redis: of the two asking for the same channel's check lease,
    one gets it, for the interval; the other skips that interval."""
    reason = redis_unreachable()
    if reason is not None:
        pytest.skip(reason)
    prefix = f"parley-test-{secrets.token_hex(4)}"

    def shared(config: dict[str, Any]) -> None:
        checked_every(3600)(config)
        config["redis"] = {"url": REDIS_URL, "prefix": prefix}

    first: Gateway = await start_gateway(shared)
    second: Gateway = await start_gateway(shared)
    leases = [g.services.health_checks.lease for g in (first, second) if g.services.health_checks]
    assert all(lease is not None for lease in leases) and len(leases) == 2
    taken = [await lease("witness", 60) for lease in leases if lease is not None]
    assert sorted(taken) == [False, True]
    again = [await lease("witness", 60) for lease in leases if lease is not None]
    assert again == [False, False]  # held for the whole interval, by whoever took it
