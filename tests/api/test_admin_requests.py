"""The request log end to end: every call with a known key, admitted or refused, is a
line of ``GET /admin/requests`` (filters, cursor pages, CSV, one line's details), no line
holds what the caller sent, and the overview counts 4xx and 429 apart from 5xx."""

from __future__ import annotations

import secrets
from typing import Any

import asyncpg
import pytest

from parley.edge.request_log import storable
from tests.api.admin_client import ADMIN, admin_gateway, browser_session, call, login
from tests.api.harness import Gateway
from tests.api.harness import call as call_as
from tests.contract.test_store import POSTGRES_URL, postgres_execute
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

SECRET_PROMPT = "the-prompt-no-log-may-hold-7f3a"


def chat(model: str = "chat-large") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": SECRET_PROMPT}]}


async def v1(gateway: Gateway, key: str | None, body: Any = None, **request: Any) -> int:
    if body is not None:
        request["json"] = body
    status, _ = await call_as(gateway, "POST", "/v1/chat/completions", key, **request)
    return status


async def lines(gateway: Gateway, query: str = "") -> list[dict[str, Any]]:
    await gateway.flush_usage()
    status, page = await call(gateway, "GET", f"/admin/requests{query}")
    assert status == 200, page
    return list(page["data"])


async def new_key(gateway: Gateway, group: str) -> tuple[str, dict[str, Any]]:
    _, made = await call(gateway, "POST", "/admin/keys", body={"group": group, "name": "ci"})
    return made["key"], made


async def test_calls_and_refusals_are_logged_without_content(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    await call(gateway, "POST", "/admin/groups", body={"name": "slow", "rpm": 1})
    key, made = await new_key(gateway, "team")
    limited, _ = await new_key(gateway, "slow")
    revoked, gone = await new_key(gateway, "team")
    await call(gateway, "DELETE", f"/admin/keys/{gone['id']}")

    assert await v1(gateway, key, chat("chat")) == 200  # an alias
    assert await v1(gateway, key, chat("no-such-model")) == 404
    assert (
        await v1(gateway, key, data=b"{not json", headers={"Content-Type": "application/json"})
        == 400
    )
    assert await v1(gateway, limited, chat()) == 200
    assert await v1(gateway, limited, chat()) == 429
    assert await v1(gateway, revoked, chat()) == 401
    assert await v1(gateway, None, chat()) == 401  # no key: nobody to log it under
    assert await v1(gateway, "sk-" + "0" * 48, chat()) == 401  # a key Parley never issued
    engine.behaviour = Behaviour(fail=500)
    assert await v1(gateway, key, chat()) >= 500

    found = await lines(gateway)
    assert len(found) == 7
    by_status: dict[int, dict[str, Any]] = {}
    for line in found:
        by_status.setdefault(line["status"], line)
    ok = next(line for line in found if line["status"] == 200 and line["group"] == "team")
    assert ok["key"] == {"id": made["id"], "name": "ci", "prefix": made["prefix"]}
    assert (ok["model_requested"], ok["model"], ok["channel"]) == ("chat", "chat-large", "engine")
    assert (ok["endpoint"], ok["dialect"], ok["admitted"]) == (
        "/v1/chat/completions",
        "openai",
        True,
    )
    assert ok["total_tokens"] > 0 and ok["cost_usd"] > 0 and ok["first_byte_ms"] is not None
    unknown = by_status[404]
    assert (unknown["error_code"], unknown["model_requested"]) == (
        "model_not_found",
        "no-such-model",
    )
    assert (unknown["admitted"], unknown["model"], unknown["cost_usd"]) == (False, None, 0)
    limit = by_status[429]
    assert (limit["group"], limit["error_code"], limit["model"]) == (
        "slow",
        "rate_limit_exceeded",
        "chat-large",
    )
    assert by_status[400]["admitted"] is False and by_status[400]["model_requested"] is None
    assert (by_status[401]["key"]["id"], by_status[401]["error_code"]) == (
        gone["id"],
        "invalid_api_key",
    )
    failed = next(line for line in found if line["status"] >= 500)
    assert failed["admitted"] is True and failed["error_code"] and failed["first_byte_ms"] is None
    everything = repr(found) + (await call(gateway, "GET", "/admin/requests?format=csv"))[1]
    assert SECRET_PROMPT not in everything and key not in everything

    _, report = await call(gateway, "GET", "/admin/usage?by=group")
    assert report["total"]["requests"] == 3  # usage counts admitted calls, not refusals
    _, overview = await call(gateway, "GET", "/admin/overview")
    today = overview["today"]
    assert (today["client_errors"], today["rate_limited"], today["errors"]) == (3, 1, 1)


async def test_filters_cursor_pages_details_and_csv(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    await call(gateway, "POST", "/admin/groups", body={"name": "other"})
    key, made = await new_key(gateway, "team")
    theirs, _ = await new_key(gateway, "other")
    for _ in range(3):
        assert await v1(gateway, key, chat()) == 200
    assert await v1(gateway, key, chat("nope")) == 404
    assert await v1(gateway, theirs, chat()) == 200

    assert len(await lines(gateway, "?group=team")) == 4
    assert [line["status"] for line in await lines(gateway, "?status=4xx")] == [404]
    assert await lines(gateway, "?status=404&group=other") == []
    assert len(await lines(gateway, f"?key={made['id']}&status=2xx")) == 3
    assert [line["model_requested"] for line in await lines(gateway, "?model=nope")] == ["nope"]
    assert len(await lines(gateway, "?since=2000-01-01&until=2999-12-31")) == 5
    assert await lines(gateway, "?until=2000-01-01T00:00:00Z") == []

    seen, cursor = [], ""
    while True:
        _, page = await call(gateway, "GET", f"/admin/requests?limit=2{cursor}")
        seen += [line["request_id"] for line in page["data"]]
        if not page["has_more"]:
            break
        cursor = f"&cursor={page['next_cursor']}"
    everything = [line["request_id"] for line in await lines(gateway)]
    assert seen == everything and len(set(seen)) == 5

    status, one = await call(gateway, "GET", f"/admin/requests/{seen[0]}")
    assert status == 200 and one["request_id"] == seen[0]
    assert (await call(gateway, "GET", "/admin/requests/req_nothing"))[0] == 404

    status, csv = await call(gateway, "GET", "/admin/requests?format=csv&group=team")
    rows = csv.splitlines()
    assert status == 200 and rows[0].startswith("created_at,request_id,group,key_name,key_prefix")
    assert len(rows) == 5 and sum("model_not_found" in row for row in rows) == 1

    for query, param in (
        ("status=6xx", "status"),
        ("status=42", "status"),
        ("since=yesterday", "since"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("key=abc", "key"),
        ("cursor=%21%21", "cursor"),
        ("format=xml", "format"),
    ):
        status, error = await call(gateway, "GET", f"/admin/requests?{query}")
        assert status == 400 and error["error"]["param"] == param, query
    assert (await call(gateway, "GET", "/admin/requests?group=nobody"))[0] == 404
    assert (await call(gateway, "GET", "/admin/requests", token=None))[0] == 401


async def test_odd_requests_are_logged_as_a_database_can_hold_them(start_gateway: Any) -> None:
    """A model name with a NUL and far too many characters is stored cut and cleaned, so
    the batch it is in is written (PostgreSQL refuses NUL, and the columns' lengths)."""
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    key, _ = await new_key(gateway, "team")
    odd = "a\x00b" + "é" * 500
    assert await v1(gateway, key, chat(odd)) == 404
    assert await v1(gateway, key, chat()) == 200
    found = await lines(gateway)
    assert len(found) == 2
    assert found[1]["model_requested"] == "ab" + "é" * 197


def test_storable_text_is_cut_valid_utf8_and_free_of_nul() -> None:
    assert storable("plain") == "plain"
    assert storable("a\x00b") == "ab"
    assert storable("a\ud800b") == "a?b"
    assert storable("x" * 300) == "x" * 200


async def test_the_dashboard_lists_filters_and_exports(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    key, _ = await new_key(gateway, "team")
    assert await v1(gateway, key, chat()) == 200
    assert await v1(gateway, key, chat("nope")) == 404
    await gateway.flush_usage()
    async with browser_session() as session:
        await login(session, gateway.base_url, ADMIN)
        async with session.get(f"{gateway.base_url}/admin/ui/requests?status=4xx") as page:
            html = await page.text()
        assert page.status == 200 and "model_not_found" in html
        assert html.count('data-status="404"') == 1 and 'data-status="200"' not in html
        async with session.get(f"{gateway.base_url}/admin/ui/requests.csv?status=2xx") as csv:
            text = await csv.text()
        assert csv.status == 200 and len(text.splitlines()) == 2
        async with session.get(f"{gateway.base_url}/admin/ui/requests?status=bad") as bad:
            assert bad.status == 200 and "&#39;status&#39; must be" in await bad.text()
        async with session.get(f"{gateway.base_url}/admin/") as overview:
            assert 'data-stat="client-errors-today">1<' in await overview.text()


async def test_a_disabled_group_a_stream_and_odd_text_on_postgres(start_gateway: Any) -> None:
    """On PostgreSQL, which refuses a NUL that SQLite stores: a stream's time to its first
    byte, a cleaned model name, and a disabled group's 403 under its key."""
    database = f"reqlog_{secrets.token_hex(6)}"
    try:
        await postgres_execute(f'CREATE DATABASE "{database}"')
    except (OSError, asyncpg.PostgresError) as error:
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL} ({error})")
    url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{database}"

    def on_postgres(config: dict[str, Any]) -> None:
        config["admin"] = {"token": ADMIN}
        config["database"] = {"url": url}

    gateway = await start_gateway(on_postgres)
    try:
        await call(gateway, "POST", "/admin/groups", body={"name": "team"})
        key, made = await new_key(gateway, "team")
        assert await v1(gateway, key, {**chat(), "stream": True}) == 200
        assert await v1(gateway, key, chat("a\x00b")) == 404
        await call(gateway, "POST", "/admin/groups/team/disable")
        assert await v1(gateway, key, chat()) == 403
        disabled, unknown, streamed = await lines(gateway)
        assert (disabled["status"], disabled["error_code"]) == (403, "group_disabled")
        assert disabled["key"]["id"] == made["id"] and disabled["admitted"] is False
        assert (unknown["status"], unknown["model_requested"]) == (404, "ab")
        assert streamed["status"] == 200 and streamed["first_byte_ms"] is not None
        assert streamed["first_byte_ms"] <= streamed["latency_ms"]
        async with browser_session() as session:  # a page cursor beyond PostgreSQL's integer
            await login(session, gateway.base_url, ADMIN)
            for before in ("9999999999", "2147483648"):
                audit = f"{gateway.base_url}/admin/ui/audit?before={before}"
                async with session.get(audit) as page:
                    assert page.status == 200 and "group.disable" in await page.text()
    finally:
        await gateway.stop()
        await postgres_execute(f'DROP DATABASE "{database}" WITH (FORCE)')
