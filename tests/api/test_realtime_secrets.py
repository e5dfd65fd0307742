"""``POST /v1/realtime/client_secrets``: short-lived ``ek_`` secrets that open realtime
sessions (in the browser's subprotocol, or as the SDK's key) and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import openai
import pytest

from parley.domain.client_secrets import ClientSecret
from parley.domain.groups import Quota
from parley.domain.keys import digest, display_prefix, new_key
from parley.runtime.client_secrets import ClientSecrets
from parley.store.sql import open_store
from tests.api.harness import CHANNEL_KEY, Gateway, call, starting
from tests.api.test_realtime import (
    MODEL,
    OTHER_MODEL,
    UPSTREAM_MODEL,
    Socket,
    realtime_config,
    ws_url,
)
from tests.upstreams.realtime import FakeRealtime


@pytest.fixture
async def upstream() -> AsyncIterator[FakeRealtime]:
    async with FakeRealtime(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def gateway(upstream: FakeRealtime, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with starting(lambda: realtime_config(upstream, tmp_path)) as start:
        yield await start()


SESSION = {"type": "realtime", "model": MODEL, "instructions": "Speak like a pirate."}


async def secret_for(gateway: Gateway, key: str, **body: object) -> dict[str, object]:
    status, reply = await call(gateway, "POST", "/v1/realtime/client_secrets", key, json=body)
    assert status == 200, reply
    return reply


async def browser(gateway: Gateway, secret: str, http: aiohttp.ClientSession) -> Socket:
    """A socket opened as a browser does: no header, the secret in the subprotocol."""
    socket = await http.ws_connect(
        ws_url(gateway), protocols=("realtime", f"openai-insecure-api-key.{secret}")
    )
    assert socket.protocol == "realtime"
    return Socket(socket)


async def test_a_browser_opens_a_bound_session_with_a_secret(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    key = await gateway.key(await gateway.group("team"))
    made = await secret_for(gateway, key, session=SESSION)
    value = made["value"]
    assert isinstance(value, str) and value.startswith("ek_")
    expires_at = made["expires_at"]
    assert isinstance(expires_at, int)
    assert abs(expires_at - (datetime.now(UTC).timestamp() + 600)) < 5  # ten minutes
    assert made["session"] == {**SESSION, "object": "realtime.session", "expires_at": expires_at}
    async with aiohttp.ClientSession() as http:
        socket = await browser(gateway, value, http)
        await socket.until("session.created")
        updated = await socket.until("session.updated")
        assert updated["session"]["instructions"] == "Speak like a pirate."
        await socket.send({"type": "response.create"})
        await socket.until("response.done")
    bound = upstream.connections[0].of_type("session.update")[0]
    assert bound["session"]["model"] == UPSTREAM_MODEL
    assert value not in str(upstream.connections[0].headers)
    stored = await gateway.services.store.find_client_secret(digest(value))
    assert stored is not None and stored.model == MODEL  # the digest is kept, not the value
    assert value not in str(stored)


async def test_a_browser_may_send_a_group_key_in_the_subprotocol(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await browser(gateway, key, http)
        await socket.until("session.created")
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await browser(gateway, "pk-not-a-key-0123456789abcdefghij", http)
    assert refused.value.status == 401


async def test_the_official_sdk_takes_a_secret_as_its_key(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    value = (await secret_for(gateway, key))["value"]
    assert isinstance(value, str)
    client = openai.AsyncOpenAI(base_url=gateway.v1, api_key=value, max_retries=0)
    gateway.clients.append(client)
    async with client.realtime.connect(model=MODEL) as connection:
        assert (await connection.recv()).type == "session.created"
    with pytest.raises(openai.AuthenticationError):  # a secret is no API key
        await client.models.list()


async def test_a_secret_opens_nothing_but_a_realtime_session(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    value = (await secret_for(gateway, key))["value"]
    assert isinstance(value, str)
    for method, path in (("GET", "/v1/models"), ("POST", "/v1/realtime/client_secrets")):
        status, reply = await call(gateway, method, path, value, json={})
        assert status == 401, (path, reply)
        assert reply["error"]["code"] == "invalid_api_key"
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await browser(gateway, "ek_" + "x" * 43, http)
    assert refused.value.status == 401


async def test_a_bound_secret_opens_its_model_only(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    value = (await secret_for(gateway, key, session=SESSION))["value"]
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(
                ws_url(gateway, OTHER_MODEL), headers={"Authorization": f"Bearer {value}"}
            )
        assert refused.value.status == 400  # a model the key may use, but not the secret
        bare = ws_url(gateway).split("?")[0]  # no model: the secret's
        socket = await http.ws_connect(bare, headers={"Authorization": f"Bearer {value}"})
        await Socket(socket).until("session.created")
        await socket.close()


async def test_a_revoked_keys_secrets_stop_working(gateway: Gateway) -> None:
    group = await gateway.group("team")
    key = await gateway.key(group)
    value = (await secret_for(gateway, key))["value"]
    assert isinstance(value, str)
    record = next(k for k in gateway.services.directory.cached_keys() if k.group_id == group.id)
    revoked = await gateway.services.store.revoke_key(record.id, datetime.now(UTC))
    gateway.services.directory.remember_key(revoked)
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await browser(gateway, value, http)
    assert refused.value.status == 401


async def test_a_session_ends_when_its_key_is_revoked(gateway: Gateway) -> None:
    group = await gateway.group("team")
    key = await gateway.key(group)
    async with aiohttp.ClientSession() as http:
        socket = Socket(
            await http.ws_connect(ws_url(gateway), headers={"Authorization": f"Bearer {key}"})
        )
        await socket.until("session.created")
        record = next(k for k in gateway.services.directory.cached_keys() if k.group_id == group.id)
        revoked = await gateway.services.store.revoke_key(record.id, datetime.now(UTC))
        gateway.services.directory.remember_key(revoked)
        await socket.send({"type": "response.create"})
        assert (await socket.until("error"))["error"]["code"] == "invalid_api_key"
        assert await socket.closed() == 1008


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"expires_after": {"anchor": "created_at", "seconds": 7200}}, 400, None),
        ({"expires_after": {"anchor": "created_at", "seconds": 5}}, 400, None),
        ({"expires_after": {"anchor": "now", "seconds": 60}}, 400, None),
        ({"session": {"type": "realtime", "model": "nope"}}, 404, None),
        ({"session": {"type": "voice"}}, 400, "session.type"),
        ({"session": {"type": ["realtime"]}}, 400, "session.type"),
        ({"session": []}, 400, "session"),
    ],
)
async def test_a_bad_request_for_a_secret_is_refused(
    gateway: Gateway, body: dict[str, object], status: int, param: str | None
) -> None:
    key = await gateway.key(await gateway.group("team"))
    got, reply = await call(gateway, "POST", "/v1/realtime/client_secrets", key, json=body)
    assert got == status, reply
    if param is not None:
        assert reply["error"]["param"] == param


async def test_secrets_are_found_by_any_worker_until_they_expire(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
    try:
        await store.migrate()
        group = await store.create_group("team", quota=Quota())
        secret_key = new_key()
        key = await store.create_key(
            group.id, name="k", digest=digest(secret_key), prefix=display_prefix(secret_key)
        )
        here = ClientSecrets(store)
        value, made = await here.issue(key.id, group.id, 60, model=None, session={"a": 1})
        assert await here.find(value) == made
        elsewhere = ClientSecrets(store)  # another worker: found in the store
        assert await elsewhere.find(value) == made
        assert await elsewhere.find(value + "x") is None
        assert await elsewhere.find(secret_key) is None  # a key is no client secret
        past = datetime.now(UTC) - timedelta(seconds=1)
        old = "ek_" + "o" * 43
        await store.add_client_secret(
            ClientSecret(digest(old), key.id, group.id, None, None, past, past)
        )
        assert await ClientSecrets(store).find(old) is None
        assert await store.prune_client_secrets(datetime.now(UTC)) == 1
        assert await store.find_client_secret(digest(value)) == made
    finally:
        await store.close()
