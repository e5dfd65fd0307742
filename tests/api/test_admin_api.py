"""/admin: groups and keys over HTTP with the admin token."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.api.admin_client import CHAT, admin_gateway, call
from tests.api.harness import Gateway


async def test_admin_creates_a_group_and_a_key_that_works_at_once(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    status, group = await call(
        gateway, "POST", "/admin/groups", body={"name": "team", "rpm": 5, "budget_usd": 2.5}
    )
    assert status == 201
    assert (group["rpm"], group["tpm"], group["budget_usd"]) == (5, None, 2.5)
    status, key = await call(gateway, "POST", "/admin/keys", body={"group": "team", "name": "ci"})
    assert status == 201 and key["key"].startswith("pk-")
    reply = await gateway.client(key["key"]).chat.completions.create(**CHAT)  # type: ignore[call-overload]
    assert reply.choices
    status, listed = await call(gateway, "GET", "/admin/keys?group=team")
    assert status == 200 and "key" not in listed["data"][0]
    assert listed["data"][0]["prefix"] == key["key"][:10]


async def test_admin_revocation_is_immediate(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    _, key = await call(gateway, "POST", "/admin/keys", body={"group": "team"})
    status, revoked = await call(gateway, "DELETE", f"/admin/keys/{key['id']}")
    assert status == 200 and revoked["revoked_at"] is not None
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/chat/completions",
            json=CHAT,
            headers={"Authorization": f"Bearer {key['key']}"},
        ) as response,
    ):
        assert response.status == 401


async def test_admin_update_group_changes_limits_live(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team", "rpm": 5})
    status, group = await call(
        gateway, "PATCH", "/admin/groups/team", body={"rpm": None, "tpm": 1000}
    )
    assert status == 200 and (group["rpm"], group["tpm"]) == (None, 1000)
    assert gateway.services.directory.group(group["id"]) is not None
    status, missing = await call(gateway, "PATCH", "/admin/groups/nobody", body={})
    assert status == 404 and set(missing["error"]) == {"message", "type", "param", "code"}


async def test_admin_needs_the_token_and_is_off_without_one(
    start_gateway: Any, gateway: Gateway
) -> None:
    secured = await admin_gateway(start_gateway)
    assert (await call(secured, "GET", "/admin/groups", token=None))[0] == 401
    assert (await call(secured, "GET", "/admin/groups", token="wrong"))[0] == 401
    assert (await call(gateway, "GET", "/admin/groups"))[0] == 404


async def test_admin_refuses_bad_input_with_envelopes(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    status, error = await call(gateway, "POST", "/admin/groups", body={"name": "x", "rpm": -1})
    assert status == 400 and error["error"]["param"] == "rpm"
    await call(gateway, "POST", "/admin/groups", body={"name": "dup"})
    status, error = await call(gateway, "POST", "/admin/groups", body={"name": "dup"})
    assert status == 400 and error["error"]["code"] == "conflict"
    status, error = await call(gateway, "POST", "/admin/keys", body={"group": "nobody"})
    assert status == 400 and error["error"]["param"] == "group"
