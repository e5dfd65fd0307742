"""/admin/channels: channels added, changed, disabled and deleted live, their
credentials sealed, tested with one real call, and their history kept."""

from __future__ import annotations

from typing import Any

from cryptography.fernet import Fernet
from sqlalchemy import select

from parley.credentials import CredentialBox
from parley.store.schema import channels
from tests.api.admin_client import ADMIN, call
from tests.api.harness import CHANNEL_KEY, Gateway
from tests.upstreams.openai_compatible import FakeEngine

SECRET_KEY = Fernet.generate_key().decode()
SPARE_KEY = "sk-spare-channel-credential-42"
ASK_SPARE = {"model": "unserved", "messages": [{"role": "user", "content": "hi there"}]}


async def sealing_gateway(start_gateway: Any, keys: list[str] | None = None) -> Gateway:
    def tweak(config: dict[str, Any]) -> None:
        config["admin"] = {"token": ADMIN, "secret_keys": keys or [SECRET_KEY]}

    gateway: Gateway = await start_gateway(tweak)
    return gateway


def spare(engine: FakeEngine, **extra: Any) -> dict[str, Any]:
    return {
        "name": "spare",
        "type": "openai",
        "base_url": engine.base_url,
        "api_key": SPARE_KEY,
        "models": [{"name": "unserved", "upstream": "spare-model"}],
        **extra,
    }


async def chat(gateway: Gateway, key: str) -> tuple[int, Any]:
    return await call(gateway, "POST", "/v1/chat/completions", token=key, body=ASK_SPARE)


async def test_a_channel_added_live_serves_at_once_and_stops_when_disabled(
    start_gateway: Any,
) -> None:
    gateway = await sealing_gateway(start_gateway)
    key = await gateway.key(await gateway.group("team"))
    assert (await chat(gateway, key))[0] == 503
    async with FakeEngine(api_key=SPARE_KEY) as engine:
        status, created = await call(gateway, "POST", "/admin/channels", body=spare(engine))
        assert status == 201, created
        assert created["source"] == "database" and not created["read_only"]
        assert created["key_hint"] == "…l-42" and SPARE_KEY not in str(created)

        status, reply = await chat(gateway, key)
        assert status == 200, reply
        assert engine.last_request.body["model"] == "spare-model"

        status, view = await call(gateway, "POST", "/admin/channels/spare/disable")
        assert status == 200 and view["disabled"] and not view["serving"]
        assert (await chat(gateway, key))[0] == 503

        await call(gateway, "POST", "/admin/channels/spare/enable")
        assert (await chat(gateway, key))[0] == 200

        status, _ = await call(
            gateway, "PATCH", "/admin/channels/spare", body={"api_key": "sk-wrong-credential-00"}
        )
        assert status == 200
        assert (await chat(gateway, key))[0] == 502  # the upstream refuses the new key

        status, deleted = await call(gateway, "DELETE", "/admin/channels/spare")
        assert status == 200 and deleted["deleted"]
        assert (await chat(gateway, key))[0] == 503
        assert (await call(gateway, "GET", "/admin/channels/spare"))[0] == 404


async def test_credentials_are_sealed_at_rest_and_never_shown_or_audited(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway = await sealing_gateway(start_gateway)
    await call(gateway, "POST", "/admin/channels", body=spare(engine))

    def raw(conn: Any) -> list[Any]:
        return list(conn.execute(select(channels)).mappings())

    rows = await gateway.services.store.database.read(raw)  # type: ignore[attr-defined]
    sealed = rows[0]["api_key_sealed"]
    assert SPARE_KEY not in str(rows) and sealed
    assert CredentialBox([SECRET_KEY]).open(sealed, "spare") == SPARE_KEY
    listed = await call(gateway, "GET", "/admin/channels")
    audit = await call(gateway, "GET", "/admin/audit")
    for shown in (listed, audit):
        assert SPARE_KEY not in str(shown) and SPARE_KEY[-8:] not in str(shown)
    names = [channel["name"] for channel in listed[1]["data"]]
    assert names == ["engine", "spare"]
    assert listed[1]["data"][0]["read_only"] and listed[1]["data"][0]["source"] == "config"


async def test_config_channels_are_read_only_and_input_is_checked(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway = await sealing_gateway(start_gateway)
    for method, path in (
        ("PATCH", "/admin/channels/engine"),
        ("POST", "/admin/channels/engine/disable"),
        ("DELETE", "/admin/channels/engine"),
    ):
        status, error = await call(gateway, method, path, body={})
        assert status == 403 and error["error"]["code"] == "read_only_channel"
    bad = [
        ({**spare(engine), "name": "engine"}, "name"),
        ({**spare(engine), "models": [{"name": "no-such-model"}]}, "models"),
        ({**spare(engine), "type": "carrier-pigeon"}, "type"),
        ({**spare(engine), "base_url": "ftp://example.com"}, "base_url"),
        ({**spare(engine), "weight": 0}, "weight"),
    ]
    for body, param in bad:
        status, error = await call(gateway, "POST", "/admin/channels", body=body)
        assert status == 400, body
        assert param in (error["error"]["param"] or "") + error["error"]["message"], error


async def test_adding_a_credential_without_a_secret_key_is_refused(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway: Gateway = await start_gateway(lambda c: c.update(admin={"token": ADMIN}))
    status, error = await call(gateway, "POST", "/admin/channels", body=spare(engine))
    assert status == 503 and "PARLEY_SECRET_KEYS" in error["error"]["message"]
    assert (await call(gateway, "GET", "/admin/channels"))[1]["data"][-1]["name"] == "engine"


async def test_the_test_button_makes_one_real_call_and_keeps_the_outcome(
    start_gateway: Any,
) -> None:
    gateway = await sealing_gateway(start_gateway)
    async with FakeEngine(api_key=SPARE_KEY) as engine:
        await call(gateway, "POST", "/admin/channels", body=spare(engine))
        status, result = await call(gateway, "POST", "/admin/channels/spare/test", body={})
        assert status == 200, result
        assert (result["ok"], result["status"], result["model"]) == (True, 200, "unserved")
        assert result["latency_ms"] >= 0 and result["message"] is None
        sent = engine.last_request.body
        assert sent["max_tokens"] == 1 and sent["model"] == "spare-model"

        await call(gateway, "PATCH", "/admin/channels/spare", body={"api_key": "sk-bad-key-9999"})
        status, result = await call(gateway, "POST", "/admin/channels/spare/test")
        assert status == 200 and not result["ok"] and result["status"] == 401
        assert "Incorrect API key" in result["message"]
        assert "sk-bad-key-9999" not in result["message"]

    status, result = await call(
        gateway, "POST", "/admin/channels/engine/test", body={"model": "vision-small"}
    )
    assert result["ok"] and result["model"] == "vision-small"
    status, history = await call(gateway, "GET", "/admin/channels/spare/history")
    assert status == 200
    outcomes = [(e["kind"], e["state"], e["status"]) for e in history["data"]]
    assert outcomes == [("test", "failed", 401), ("test", "ok", 200)]
    assert history["data"][0]["actor"] == "token"
    status, error = await call(
        gateway, "POST", "/admin/channels/spare/test", body={"model": "chat-large"}
    )
    assert status == 400 and error["error"]["param"] == "model"


async def test_breaker_transitions_are_kept_across_restarts(start_gateway: Any) -> None:
    gateway = await sealing_gateway(start_gateway)
    async with FakeEngine() as engine:
        body = spare(engine, models=[{"name": "unserved", "upstream": "fail-500"}])
        body["breaker"] = {"failures": 2, "min_calls": 2, "window": 2}
        await call(gateway, "POST", "/admin/channels", body=body)
        key = await gateway.key(await gateway.group("team"))
        for _ in range(2):
            assert (await chat(gateway, key))[0] == 502
        await gateway.services.refresh()
    second = await sealing_gateway(start_gateway)
    status, history = await call(second, "GET", "/admin/channels/spare/history")
    assert status == 200
    events = [(e["kind"], e["model"], e["state"]) for e in history["data"]]
    assert events == [("breaker", "fail-500", "open")]
    assert "500" in history["data"][0]["message"]


async def test_keys_rotate_and_reseal_keeps_every_channel_serving(
    start_gateway: Any, engine: FakeEngine
) -> None:
    old = await sealing_gateway(start_gateway, [SECRET_KEY])
    await call(old, "POST", "/admin/channels", body=spare(engine, api_key=None))
    await call(old, "PATCH", "/admin/channels/spare", body={"api_key": CHANNEL_KEY})
    new_key = Fernet.generate_key().decode()
    rotated = await sealing_gateway(start_gateway, [new_key, SECRET_KEY])
    status, result = await call(rotated, "POST", "/admin/channels/reseal")
    assert status == 200 and result["resealed"] == 1

    newest = await sealing_gateway(start_gateway, [new_key])
    key = await newest.key(await newest.group("team2"))
    assert (await chat(newest, key))[0] == 200
    only_old = await sealing_gateway(start_gateway, [SECRET_KEY])
    listed = (await call(only_old, "GET", "/admin/channels"))[1]["data"]
    assert [c["serving"] for c in listed if c["name"] == "spare"] == [False]


async def test_a_disabled_channel_fails_over_to_the_models_other_channel(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway = await sealing_gateway(start_gateway)
    key = await gateway.key(await gateway.group("team"))
    ask = {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]}
    async with FakeEngine(api_key=SPARE_KEY) as preferred:
        body = {
            **spare(preferred),
            "models": [{"name": "chat-large", "upstream": "preferred-chat"}],
            "priority": 10,
        }
        assert (await call(gateway, "POST", "/admin/channels", body=body))[0] == 201
        before = len(engine.requests)
        status, _ = await call(gateway, "POST", "/v1/chat/completions", token=key, body=ask)
        assert status == 200 and len(preferred.requests) == 1 and len(engine.requests) == before
        await call(gateway, "POST", "/admin/channels/spare/disable")
        status, _ = await call(gateway, "POST", "/v1/chat/completions", token=key, body=ask)
        assert status == 200 and len(preferred.requests) == 1
        assert len(engine.requests) == before + 1  # the config file's channel answered


async def test_the_test_button_uses_the_cheapest_call_of_the_models_kind(
    start_gateway: Any,
) -> None:
    def tweak(config: dict[str, Any]) -> None:
        config["admin"] = {"token": ADMIN, "secret_keys": [SECRET_KEY]}
        config["models"].append({"name": "embed-small", "kind": "embedding"})

    gateway: Gateway = await start_gateway(tweak)
    async with FakeEngine() as embedder:
        body = {**spare(embedder), "models": [{"name": "embed-small"}], "api_key": None}
        assert (await call(gateway, "POST", "/admin/channels", body=body))[0] == 201
        status, result = await call(gateway, "POST", "/admin/channels/spare/test")
        assert status == 200 and result["ok"], result
        assert embedder.last_request.path == "/v1/embeddings"
        assert embedder.last_request.body["input"] == "ok"


async def test_a_base_url_without_its_version_path_is_named_in_the_test(
    start_gateway: Any,
) -> None:
    """An address without the provider's ``/v1`` (as the Anthropic SDK takes it) gets a
    bare 404 from the upstream: the test says where to look, not only the status."""
    gateway = await sealing_gateway(start_gateway)
    async with FakeEngine(api_key=SPARE_KEY) as engine:
        root = engine.base_url.removesuffix("/v1")
        await call(gateway, "POST", "/admin/channels", body=spare(engine, base_url=root))
        status, result = await call(gateway, "POST", "/admin/channels/spare/test")
        assert status == 200 and not result["ok"] and result["status"] == 404
        assert "check the channel's base URL" in result["message"]
        assert "/chat/completions" in result["message"]
        assert "channel `spare`" in result["message"] and "`spare-model`" in result["message"]

        await call(gateway, "PATCH", "/admin/channels/spare", body={"base_url": engine.base_url})
        status, result = await call(
            gateway, "POST", "/admin/channels/spare/test", body={"model": "unserved"}
        )
        assert result["ok"], result
