"""/admin/models: models, aliases and prices added, changed and deleted live, reaching
every instance on the refresh loop; a price change taking effect at its stated instant;
and the request log keeping the unit prices each call was billed at."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import openai
import pytest

from parley.domain.pricing import Price, usd_to_nanos
from tests.api.admin_client import ADMIN, admin_gateway, browser_session, call, login
from tests.api.harness import Gateway, StartGateway, default_config, records, starting
from tests.api.test_admin_accounts import as_account, staffed
from tests.upstreams.openai_compatible import FakeEngine

FRESH = {
    "name": "fresh-model",
    "kind": "chat",
    "aliases": ["fresh"],
    "channels": [{"channel": "engine", "upstream": "upstream-fresh"}],
    "prices": {"input_per_1k": "0.002", "output_per_1k": "0.004"},
}
ASK = [{"role": "user", "content": "hello there"}]


def priced(input_usd: str, output_usd: str) -> Price:
    """A chat model's price as the config's rules make it: cache reads and writes (and
    image input) at the input price when not set."""
    fresh = usd_to_nanos(input_usd)
    return Price(
        input_per_1k=fresh,
        output_per_1k=usd_to_nanos(output_usd),
        cached_input_per_1k=fresh,
        cache_write_per_1k=fresh,
        image_input_per_1k=fresh,
    )


async def ask(gateway: Gateway, key: str, model: str = "fresh-model") -> str:
    reply = await gateway.client(key).chat.completions.create(model=model, messages=ASK)
    return reply.id


async def until(check: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "never came true"
        await asyncio.sleep(0.05)


@pytest.fixture
async def on_each_store(
    engine: FakeEngine, database_url: str, tmp_path: Path
) -> AsyncIterator[StartGateway]:
    """Gateways on one database: a SQLite file, then PostgreSQL."""

    def config() -> dict[str, Any]:
        settings = default_config(engine.base_url, tmp_path)
        settings["database"] = {"url": database_url}
        return settings

    async with starting(config) as start:
        yield start


async def test_a_model_added_live_is_callable_on_every_instance_without_restart(
    on_each_store: StartGateway, engine: FakeEngine
) -> None:
    gateway = await admin_gateway(on_each_store)
    other = await admin_gateway(on_each_store)  # a second instance on the same database
    key = await gateway.key(await gateway.group("team"))
    with pytest.raises(openai.NotFoundError):
        await ask(gateway, key)

    status, created = await call(gateway, "POST", "/admin/models", body=FRESH)
    assert status == 201, created
    assert created["source"] == "database" and not created["read_only"] and created["serving"]
    assert created["prices"] == {"input_per_1k": "0.002", "output_per_1k": "0.004"}

    await ask(gateway, key)
    assert engine.last_request.body["model"] == "upstream-fresh"
    await ask(gateway, key, "fresh")  # the alias routes too
    listed = await gateway.client(key).models.list()
    assert "fresh-model" in [model.id for model in listed.data]

    async def other_serves_it() -> bool:
        return other.services.models.resolve("fresh-model") is not None

    await until(other_serves_it)  # brought by the other instance's refresh loop
    other_key = await other.key(await other.group("elsewhere"))
    await ask(other, other_key)
    billed = [r.price for r in await records(other) if r.model == "fresh-model"]
    assert set(billed) == {priced("0.002", "0.004").tag}

    status, _ = await call(gateway, "PATCH", "/admin/models/fresh-model", body={"enabled": False})
    assert status == 200
    with pytest.raises(openai.NotFoundError):
        await ask(gateway, key)
    status, deleted = await call(gateway, "DELETE", "/admin/models/fresh-model")
    assert status == 200 and deleted["deleted"]
    assert (await call(gateway, "GET", "/admin/models/fresh-model"))[0] == 404


async def test_each_call_is_billed_and_logged_at_the_price_in_force(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    key = await gateway.key(await gateway.group("team"))
    await call(gateway, "POST", "/admin/models", body=FRESH)
    await ask(gateway, key)

    (record,) = [r for r in await records(gateway) if r.model == "fresh-model"]
    assert record.price == priced("0.002", "0.004").tag
    assert record.cost_nanos == priced("0.002", "0.004").cost(
        prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens
    )
    assert record.cost_nanos > 0
    status, line = await call(gateway, "GET", f"/admin/requests/{record.request_id}")
    assert status == 200, line
    assert line["price"] == {
        "input_per_1k": 0.002,
        "output_per_1k": 0.004,
        "cached_input_per_1k": 0.002,
        "cache_write_per_1k": 0.002,
        "image_input_per_1k": 0.002,
    }

    async with browser_session() as session:
        await login(session, gateway.base_url, ADMIN)
        url = f"{gateway.base_url}/admin/ui/requests/{record.request_id}"
        async with session.get(url) as page:
            html = await page.text()
        async with session.get(f"{gateway.base_url}/admin/ui/groups") as page:
            groups = await page.text()
    assert 'value="fresh-model"' in groups  # a group may be given the live model
    assert "Billed at" in html
    assert "$0.002 per 1K input tokens" in html and "$0.004 per 1K output tokens" in html


async def test_a_price_change_takes_effect_at_its_stated_instant(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    key = await gateway.key(await gateway.group("team"))
    await call(gateway, "POST", "/admin/models", body=FRESH)
    clock = [time.time()]
    gateway.services.models.clock = lambda: clock[0]  # the call time, controlled
    at = datetime.now(UTC) + timedelta(hours=1)
    change = {
        "prices": {"input_per_1k": "0.01", "output_per_1k": "0.03"},
        "effective_from": at.isoformat().replace("+00:00", "Z"),
    }
    status, view = await call(gateway, "PATCH", "/admin/models/fresh-model", body=change)
    assert status == 200, view
    assert view["prices"] == FRESH["prices"]
    assert view["next_prices"] == change["prices"]
    assert datetime.fromisoformat(view["next_prices_from"]) == at

    await ask(gateway, key)  # a second before the instant: the old price
    clock[0] = at.timestamp() - 1
    await ask(gateway, key)
    clock[0] = at.timestamp()  # the instant itself: the new price, no refresh, no restart
    await ask(gateway, key)
    clock[0] = at.timestamp() + 3600
    await ask(gateway, key)

    billed = [r.price for r in await records(gateway) if r.model == "fresh-model"]
    old, new = priced("0.002", "0.004").tag, priced("0.01", "0.03").tag
    assert sorted(billed) == sorted([old, old, new, new])
    assert billed.count(new) == 2

    _, audit = await call(gateway, "GET", "/admin/audit?action=model.update")
    (entry,) = audit["data"]
    changed = entry["detail"]["changed"]
    assert changed["next_prices"] == {"before": None, "after": change["prices"]}
    assert changed["next_prices_from"]["after"] == at.isoformat()

    status, view = await call(
        gateway, "PATCH", "/admin/models/fresh-model", body={"next_prices": None}
    )
    assert status == 200 and view["next_prices"] is None and view["next_prices_from"] is None


async def test_a_price_change_without_an_instant_applies_at_once(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    key = await gateway.key(await gateway.group("team"))
    await call(gateway, "POST", "/admin/models", body=FRESH)
    body = {"prices": {"input_per_1k": "0.5"}}
    status, view = await call(gateway, "PATCH", "/admin/models/fresh-model", body=body)
    assert status == 200 and view["prices"] == {"input_per_1k": "0.5"}
    await ask(gateway, key)
    (record,) = [r for r in await records(gateway) if r.model == "fresh-model"]
    assert json.loads(record.price or "")["input_per_1k"] == usd_to_nanos("0.5")
    assert "output_per_1k" not in json.loads(record.price or "")  # unset: free


async def test_config_models_are_read_only_and_input_is_checked(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    status, listed = await call(gateway, "GET", "/admin/models")
    assert status == 200
    config = {m["name"]: m for m in listed["data"]}
    assert config["chat-large"]["source"] == "config" and config["chat-large"]["read_only"]
    assert config["chat-large"]["channels"] == [{"channel": "engine", "upstream": "upstream-chat"}]
    for method in ("PATCH", "DELETE"):
        status, error = await call(gateway, method, "/admin/models/chat-large", body={})
        assert status == 403 and error["error"]["code"] == "read_only_model"

    for name in ("chat-large", "chat", "chat-legacy"):  # a name, an alias, a retired alias
        status, error = await call(gateway, "POST", "/admin/models", body={**FRESH, "name": name})
        assert status == 409 and error["error"]["code"] == "conflict", error
    status, error = await call(
        gateway, "POST", "/admin/models", body={**FRESH, "aliases": ["chat"]}
    )
    assert status == 409 and error["error"]["param"] == "aliases"

    bad = [
        ({**FRESH, "name": "has space"}, "name"),
        ({**FRESH, "name": "a/b"}, "name"),
        ({**FRESH, "kind": "telepathy"}, "kind"),
        ({**FRESH, "channels": [{"channel": "nowhere"}]}, "channels"),
        ({**FRESH, "channels": "engine"}, "channels"),
        ({**FRESH, "prices": {"input_per_1k": "lots"}}, "prices.input_per_1k"),
        ({**FRESH, "prices": {"input_per_1k": "-1"}}, "prices.input_per_1k"),
        ({**FRESH, "prices": {"per_mile": "1"}}, "prices.per_mile"),
        ({**FRESH, "context_window": 0}, "context_window"),
        ({**FRESH, "enabled": "yes"}, "enabled"),
        ({**FRESH, "effective_from": "2030-01-01T00:00:00Z"}, "effective_from"),
    ]
    for body, param in bad:
        status, error = await call(gateway, "POST", "/admin/models", body=body)
        assert status == 400, (body, error)
        assert error["error"]["param"] == param, error
        assert param.split(".")[-1] in error["error"]["message"], error
    status, error = await call(gateway, "POST", "/admin/models", body={**FRESH, "kind": "speech"})
    assert status == 400 and "per_1k_characters" in error["error"]["message"]
    voice = {**FRESH, "name": "fresh-voice", "kind": "realtime", "aliases": []}
    status, error = await call(gateway, "POST", "/admin/models", body=voice)
    assert status == 400 and "audio_output_per_1k" in error["error"]["message"]
    priced = {"input_per_1k": "0.004", "output_per_1k": "0.016"}
    priced |= {"audio_input_per_1k": "0.032", "audio_output_per_1k": "0.064"}
    status, created = await call(gateway, "POST", "/admin/models", body={**voice, "prices": priced})
    assert status == 201 and created["prices"]["audio_output_per_1k"] == "0.064", created

    assert (await call(gateway, "POST", "/admin/models", body=FRESH))[0] == 201
    status, error = await call(gateway, "POST", "/admin/models", body=FRESH)
    assert status == 409
    for change, param in (
        ({"effective_from": "2030-01-01T00:00:00"}, "effective_from"),
        ({"prices": {}, "effective_from": "2030-01-01T00:00:00"}, "effective_from"),
        ({"prices": {}, "effective_from": "next tuesday"}, "effective_from"),
        ({"next_prices": {"input_per_1k": "1"}}, "next_prices"),
    ):
        status, error = await call(gateway, "PATCH", "/admin/models/fresh-model", body=change)
        assert status == 400 and error["error"]["param"] == param, (change, error)
    assert (await call(gateway, "PATCH", "/admin/models/nothing", body={}))[0] == 404


async def test_viewers_read_models_operators_change_them_and_each_change_is_audited(
    start_gateway: Any,
) -> None:
    gateway = await staffed(start_gateway)
    assert (await as_account(gateway, "vera", "GET", "/admin/models"))[0] == 200
    for method, path, body in (
        ("POST", "/admin/models", FRESH),
        ("PATCH", "/admin/models/fresh-model", {"enabled": False}),
        ("DELETE", "/admin/models/fresh-model", None),
    ):
        status, error = await as_account(gateway, "vera", method, path, body)
        assert status == 403 and error["error"]["code"] == "insufficient_role"

    status, _ = await as_account(gateway, "oscar", "POST", "/admin/models", FRESH)
    assert status == 201
    change = {"aliases": ["fresh", "crisp"], "channels": ["engine"]}
    status, view = await as_account(gateway, "oscar", "PATCH", "/admin/models/fresh-model", change)
    assert status == 200 and view["aliases"] == ["fresh", "crisp"]
    assert view["channels"] == [{"channel": "engine", "upstream": "fresh-model"}]
    assert (await as_account(gateway, "oscar", "DELETE", "/admin/models/fresh-model"))[0] == 200

    _, audit = await call(gateway, "GET", "/admin/audit?action=model.")
    entries = {e["action"]: e for e in audit["data"]}
    assert set(entries) == {"model.create", "model.update", "model.delete"}
    assert {e["actor"] for e in entries.values()} == {"oscar"}
    assert entries["model.create"]["detail"]["prices"] == FRESH["prices"]
    changed = entries["model.update"]["detail"]["changed"]
    assert changed == {
        "aliases": {"before": ["fresh"], "after": ["fresh", "crisp"]},
        "channels": {
            "before": [{"channel": "engine", "upstream": "upstream-fresh"}],
            "after": [{"channel": "engine"}],
        },
    }
