"""/admin usage across groups (JSON and CSV), the overview, and channels with live health."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.api.admin_client import admin_gateway, call, chat_status
from tests.api.harness import CHANNEL_KEY
from tests.upstreams.openai_compatible import Behaviour, FakeEngine


async def _two_groups_with_calls(gateway: Any) -> None:
    for name, calls in (("alpha", 2), ("beta", 1)):
        await call(gateway, "POST", "/admin/groups", body={"name": name})
        _, key = await call(gateway, "POST", "/admin/keys", body={"group": name})
        for _ in range(calls):
            assert (await chat_status(gateway, key["key"]))[0] == 200
    await gateway.flush_usage()


async def test_usage_across_groups_by_group_model_and_day(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await _two_groups_with_calls(gateway)
    today = datetime.now(UTC).date().isoformat()
    status, report = await call(gateway, "GET", "/admin/usage?by=group")
    assert status == 200
    assert [(row["group"], row["requests"]) for row in report["data"]] == [
        ("alpha", 2),
        ("beta", 1),
    ]
    assert report["total"]["requests"] == 3 and report["total"]["cost_usd"] > 0
    _, one = await call(gateway, "GET", f"/admin/usage?group=beta&by=day,model&since={today}")
    assert one["data"] == [{**one["data"][0], "day": today, "model": "chat-large", "requests": 1}]
    _, repeated = await call(
        gateway, "GET", f"/admin/usage?group=beta&by=day&by=model&since={today}"
    )
    assert repeated["data"] == one["data"]
    _, none = await call(gateway, "GET", "/admin/usage?model=vision-small")
    assert none["data"] == [] and none["total"]["requests"] == 0
    status, csv = await call(gateway, "GET", "/admin/usage?by=group,model&format=csv")
    assert status == 200
    lines = csv.splitlines()
    assert lines[0].startswith("group,model,requests,prompt_tokens")
    assert lines[1].startswith("alpha,chat-large,2,") and lines[2].startswith("beta,chat-large,1,")


async def test_usage_refuses_bad_ranges_and_unknown_groups(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    for query, param in (
        ("since=2026-13-01", "since"),
        ("since=2026-02-02&until=2026-02-01", "until"),
        ("since=2020-01-01&until=2026-01-01", "since"),
        ("by=week", "by"),
        ("format=xml", "format"),
    ):
        status, error = await call(gateway, "GET", f"/admin/usage?{query}")
        assert status == 400 and error["error"]["param"] == param, query
    assert (await call(gateway, "GET", "/admin/usage?group=nobody"))[0] == 404


async def test_overview_counts_today_and_thirty_days(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await _two_groups_with_calls(gateway)
    status, view = await call(gateway, "GET", "/admin/overview")
    assert status == 200
    assert view["today"]["requests"] == 3 and view["today"]["tokens"] > 0
    assert view["last_30_days"]["requests"] == 3 and len(view["days"]) == 30
    assert view["days"][-1]["day"] == datetime.now(UTC).date().isoformat()
    assert (view["groups"], view["active_keys"]) == (2, 2)


async def test_channels_show_health_and_no_credentials(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway = await admin_gateway(start_gateway)
    group = await gateway.group("team")
    key = await gateway.key(group)
    status, listed = await call(gateway, "GET", "/admin/channels")
    assert status == 200 and listed["data"][0]["health"]["state"] == "idle"
    assert (await chat_status(gateway, key))[0] == 200
    engine.behaviour = Behaviour(fail=500)
    assert (await chat_status(gateway, key))[0] >= 500
    status, listed = await call(gateway, "GET", "/admin/channels")
    channel = listed["data"][0]
    assert channel["name"] == "engine" and channel["has_api_key"] is True
    assert channel["models"][0] == {"name": "chat-large", "upstream": "upstream-chat"}
    health = channel["health"]
    assert (health["calls"], health["errors"], health["error_rate"]) == (2, 1, 0.5)
    assert health["last_error_status"] >= 500 and health["state"] == "failing"
    assert health["p95_latency_ms"] is not None
    assert channel["circuit"]["state"] == "closed"  # one failure does not open it
    assert CHANNEL_KEY not in repr(listed)
