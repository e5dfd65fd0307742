"""Authentication, validation and error envelopes: every error is OpenAI's shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest

from parley.store.engine import sqlite_file
from parley.store.sqlite_serving import SqliteServingStore
from tests.api.harness import Gateway, call

CHAT = {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]}
HI: Any = CHAT["messages"]


async def post(gateway: Gateway, key: str | None, body: Any, **kwargs: Any) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    headers.update(kwargs.pop("headers", {}))
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/chat/completions", json=body, headers=headers, **kwargs
        ) as response,
    ):
        return response.status, await response.json(content_type=None)


def assert_envelope(payload: Any) -> dict[str, Any]:
    assert set(payload) == {"error"}
    error = payload["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert "Traceback" not in error["message"]
    return dict(error)


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Basic abc", "Bearer short", "Bearer pk-" + "x" * 43],
    ids=["missing", "empty", "no-token", "basic", "malformed", "wrong"],
)
async def test_missing_malformed_or_wrong_key_is_401(
    gateway: Gateway, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    status, payload = await post(gateway, None, CHAT, headers=headers)
    assert status == 401
    assert assert_envelope(payload)["code"] == "invalid_api_key"


async def test_revoked_key_is_refused_at_once_on_the_instance_that_revoked(
    gateway: Gateway,
) -> None:
    key = await gateway.key(await gateway.group("team"))
    assert (await post(gateway, key, CHAT))[0] == 200
    record = (await gateway.services.store.list_keys())[0]
    revoked = await gateway.services.store.revoke_key(record.id, datetime.now(UTC))
    gateway.services.directory.remember_key(revoked)
    status, payload = await post(gateway, key, CHAT)
    assert status == 401
    assert "revoked" in assert_envelope(payload)["message"]


async def test_key_revoked_elsewhere_is_refused_after_the_refresh(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    assert (await post(gateway, key, CHAT))[0] == 200
    record = (await gateway.services.store.list_keys())[0]
    await gateway.services.store.revoke_key(record.id, datetime.now(UTC))  # as another instance
    await gateway.services.refresh()
    assert (await post(gateway, key, CHAT))[0] == 401


async def test_expired_key_is_401(gateway: Gateway) -> None:
    group = await gateway.group("team")
    key = await gateway.key(group, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    status, payload = await post(gateway, key, CHAT)
    assert status == 401
    assert "expired" in assert_envelope(payload)["message"]


async def test_key_created_by_another_instance_works_without_waiting(gateway: Gateway) -> None:
    from parley.domain.keys import digest, display_prefix, new_key

    group = await gateway.group("team")
    secret = new_key()
    await gateway.services.store.create_key(
        group.id, name="cli", digest=digest(secret), prefix=display_prefix(secret)
    )
    assert (await post(gateway, secret, CHAT))[0] == 200


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": 5, "messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "chat-large"}, "messages"),
        ({"model": "chat-large", "messages": []}, "messages"),
        ({"model": "chat-large", "messages": "hi"}, "messages"),
        ({"model": "chat-large", "messages": ["hi"]}, "messages[0]"),
        ({"model": "chat-large", "messages": [{"content": "x"}]}, "messages[0].role"),
        ({"model": "chat-large", "messages": [{"role": "user"}]}, "messages[0].content"),
        ({**CHAT, "stream": "yes"}, "stream"),
        ({**CHAT, "max_tokens": 0}, "max_tokens"),
        ({**CHAT, "max_tokens": 2.5}, "max_tokens"),
        ({**CHAT, "temperature": 2.5}, "temperature"),
        ({**CHAT, "temperature": "hot"}, "temperature"),
        ({**CHAT, "stream_options": {"include_usage": True}}, "stream_options"),
    ],
)
async def test_invalid_fields_are_400_naming_the_param(
    gateway: Gateway, key: str, body: dict[str, Any], param: str
) -> None:
    status, payload = await post(gateway, key, body)
    assert status == 400
    error = assert_envelope(payload)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param


async def test_malformed_json_is_400(gateway: Gateway, key: str) -> None:
    status, payload = await post(
        gateway, key, None, data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert status == 400
    assert "JSON" in assert_envelope(payload)["message"]


async def test_wrong_content_type_is_415(gateway: Gateway, key: str) -> None:
    status, payload = await post(
        gateway, key, None, data=b"model=x", headers={"Content-Type": "text/plain"}
    )
    assert status == 415
    assert_envelope(payload)


async def test_body_over_the_limit_is_413(start_gateway: Any) -> None:
    gateway = await start_gateway(lambda c: c["server"].update(max_body_bytes=2000))
    key = await gateway.key(await gateway.group("team"))
    body = {**CHAT, "messages": [{"role": "user", "content": "x" * 5000}]}
    status, payload = await post(gateway, key, body)
    assert status == 413
    error = assert_envelope(payload)
    assert error["code"] == "payload_too_large"
    assert error["message"] == "The request body is too large: the limit is 2000 bytes."


async def test_unknown_and_inaccessible_models_get_the_same_404(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("narrow", models=["vision-small"]))
    replies = [await post(gateway, key, {**CHAT, "model": name}) for name in ("chat-large", "nope")]
    for (status, payload), name in zip(replies, ("chat-large", "nope"), strict=True):
        assert status == 404
        error = assert_envelope(payload)
        assert error["code"] == "model_not_found"
        assert (
            error["message"]
            == f"The model `{name}` does not exist or you do not have access to it. "
            "GET /v1/models lists the models your key can use."
        )


async def test_sdk_raises_not_found_for_an_unknown_model(gateway: Gateway, key: str) -> None:
    with pytest.raises(openai.NotFoundError) as refused:
        await gateway.client(key).chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "x"}]
        )
    assert refused.value.code == "model_not_found"


async def test_unknown_route_and_method_get_envelopes(gateway: Gateway, key: str) -> None:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session:
        async with session.get(f"{gateway.v1}/nothing-here") as response:
            assert response.status == 404
            assert_envelope(await response.json())
        async with session.get(f"{gateway.v1}/chat/completions") as response:
            assert response.status == 405
            assert_envelope(await response.json())


@pytest.mark.parametrize("credential", ["valid", "wrong"])
async def test_a_wrong_path_is_a_404_whatever_the_key(
    gateway: Gateway, key: str, credential: str
) -> None:
    """A base URL ending in ``/v1`` makes an SDK ask for ``/v1/v1/...``: a 404 in its
    dialect's envelope, never a 401 that reads as a bad key, and the same for any key."""
    secret = key if credential == "valid" else "pk-" + "x" * 43
    claude = anthropic.AsyncAnthropic(base_url=gateway.v1, api_key=secret, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as refused:
        await claude.messages.create(model="chat-large", max_tokens=10, messages=HI)
    await claude.close()
    body: Any = refused.value.body
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    client = openai.AsyncOpenAI(base_url=f"{gateway.v1}/v1", api_key=secret, max_retries=0)
    with pytest.raises(openai.NotFoundError) as unrouted:
        await client.chat.completions.create(model="chat-large", messages=HI)
    await client.close()
    assert assert_envelope({"error": unrouted.value.body})["type"] == "invalid_request_error"


async def test_a_wrong_path_or_method_is_refused_before_the_key_is_read(
    gateway: Gateway,
) -> None:
    for method, path in (("POST", "/v1/v1/messages"), ("GET", "/v1/chat/completions")):
        status, payload = await call(gateway, method, path, None, json=CHAT)
        assert status in (404, 405)
        assert assert_envelope(payload)["code"] != "invalid_api_key"


async def test_uncached_key_with_the_database_down_is_503_not_a_crash(
    gateway: Gateway, key: str
) -> None:
    assert (await post(gateway, key, CHAT))[0] == 200
    store = gateway.services.store
    assert isinstance(store, SqliteServingStore)
    await store.dispose()  # no connection left open on the file
    database = Path(str(sqlite_file(gateway.settings.database.url)))
    for path in database.parent.glob(database.name + "*"):
        path.unlink()
    database.mkdir()  # noqa: ASYNC240 -- the next connection cannot open the file: down
    assert (await post(gateway, key, CHAT))[0] == 200  # cached: no database needed
    status, payload = await post(gateway, "pk-" + "y" * 43, CHAT)
    assert status == 503
    assert_envelope(payload)
