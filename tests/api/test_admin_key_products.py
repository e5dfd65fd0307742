"""/admin keys as products: usage and spend per key, a key's own models and budget on top
of its group's, editing a key, rotating its secret with a grace period, and a key's
status when its group is disabled."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.api.admin_client import admin_gateway, call, chat_status
from tests.api.harness import call as call_as
from tests.api.test_admin_accounts import as_account, staffed

CHAT_PATH = "/v1/chat/completions"
VISION = {"model": "vision-small", "messages": [{"role": "user", "content": "hi"}]}


async def _key(gateway: Any, group: str, **fields: Any) -> dict[str, Any]:
    status, key = await call(gateway, "POST", "/admin/keys", body={"group": group, **fields})
    assert status == 201, key
    return dict(key)


async def test_usage_and_spend_are_reported_per_key(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    ci, app = await _key(gateway, "team", name="ci"), await _key(gateway, "team", name="app")
    for _ in range(2):
        assert (await chat_status(gateway, ci["key"]))[0] == 200
    assert (await chat_status(gateway, app["key"]))[0] == 200
    await gateway.flush_usage()

    status, report = await call(gateway, "GET", "/admin/usage?by=key")
    assert status == 200, report
    rows = {row["key"]: row for row in report["data"]}
    assert rows[f"{ci['prefix']}… ci"]["requests"] == 2
    assert rows[f"{app['prefix']}… app"]["requests"] == 1
    assert report["total"]["requests"] == 3
    assert rows[f"{ci['prefix']}… ci"]["cost_usd"] > 0

    status, one = await call(gateway, "GET", f"/admin/usage?key={ci['id']}&by=model")
    assert status == 200 and one["key"] == ci["id"]
    assert one["data"] == [{**one["data"][0], "model": "chat-large", "requests": 2}]

    status, shown = await call(gateway, "GET", f"/admin/keys/{ci['id']}")
    assert status == 200 and shown["budget"]["limit_usd"] is None
    assert shown["budget"]["spent_usd"] == rows[f"{ci['prefix']}… ci"]["cost_usd"]
    assert (await call(gateway, "GET", "/admin/usage?key=abc"))[0] == 400


async def test_a_keys_models_narrow_its_groups(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    narrow = await _key(gateway, "team", models=["chat-large"])
    wide = await _key(gateway, "team")
    assert narrow["models"] == ["chat-large"] and wide["models"] is None
    assert (await chat_status(gateway, narrow["key"]))[0] == 200
    status, error = await call_as(gateway, "POST", CHAT_PATH, narrow["key"], json=VISION)
    assert status == 404 and error["error"]["code"] == "model_not_found"
    assert (await call_as(gateway, "POST", CHAT_PATH, wide["key"], json=VISION))[0] == 200
    _, listed = await call_as(gateway, "GET", "/v1/models", narrow["key"])
    assert [model["id"] for model in listed["data"]] == ["chat-large"]

    await call(gateway, "PATCH", "/admin/groups/team", body={"models": ["vision-small"]})
    # the key's list never widens the group's: now the narrow key may use nothing
    assert (await chat_status(gateway, narrow["key"]))[0] == 404
    status, key = await call(gateway, "PATCH", f"/admin/keys/{narrow['id']}", body={"models": None})
    assert status == 200 and key["models"] is None
    status, _ = await call_as(gateway, "POST", CHAT_PATH, narrow["key"], json=VISION)
    assert status == 200


async def test_a_keys_budget_is_held_on_top_of_its_groups(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team", "budget_usd": 100})
    capped = await _key(gateway, "team", budget_usd=0)
    free = await _key(gateway, "team")
    status, error = await chat_status(gateway, capped["key"])
    assert status == 429 and error["error"]["code"] == "insufficient_quota"
    assert "key" in error["error"]["message"]
    assert (await chat_status(gateway, free["key"]))[0] == 200

    # a budget smaller than one call: the first call is admitted, the next is not
    status, key = await call(
        gateway, "PATCH", f"/admin/keys/{capped['id']}", body={"budget_usd": 0.00000001}
    )
    assert status == 200 and key["budget_usd"] == 0.00000001
    assert (await chat_status(gateway, capped["key"]))[0] == 200
    status, error = await chat_status(gateway, capped["key"])
    assert status == 429 and error["error"]["code"] == "insufficient_quota"
    await gateway.flush_usage()
    await gateway.services.refresh()  # the spend, read back from the per-key rollups
    assert (await chat_status(gateway, capped["key"]))[0] == 429
    assert (await chat_status(gateway, free["key"]))[0] == 200
    _, shown = await call(gateway, "GET", f"/admin/keys/{capped['id']}")
    assert shown["budget"]["spent_usd"] > shown["budget"]["limit_usd"] > 0

    await call(gateway, "PATCH", f"/admin/keys/{capped['id']}", body={"budget_usd": None})
    assert (await chat_status(gateway, capped["key"]))[0] == 200


async def test_editing_a_key_changes_label_rates_and_expiry_and_is_audited(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    key = await _key(gateway, "team", name="old")
    path = f"/admin/keys/{key['id']}"
    status, changed = await call(
        gateway,
        "PATCH",
        path,
        body={"name": "mobile app", "rpm": 1, "expires_at": "2099-01-31T00:00:00Z"},
    )
    assert status == 200, changed
    assert changed["name"] == "mobile app" and changed["rpm"] == 1
    assert changed["expires_at"].startswith("2099-01-31")
    assert (await chat_status(gateway, key["key"]))[0] == 200
    status, error = await chat_status(gateway, key["key"])
    assert status == 429 and error["error"]["code"] == "rate_limit_exceeded"

    status, changed = await call(gateway, "PATCH", path, body={"expires_at": "2020-01-01"})
    assert status == 200 and changed["status"] == "expired"
    assert (await chat_status(gateway, key["key"]))[0] == 401
    status, changed = await call(gateway, "PATCH", path, body={"expires_at": None, "rpm": None})
    assert status == 200 and changed["expires_at"] is None and changed["status"] == "active"
    assert (await chat_status(gateway, key["key"]))[0] == 200

    for bad in ({"rpm": 0}, {"expires_at": "soon"}, {"models": "all"}, {"budget_usd": -1}):
        status, error = await call(gateway, "PATCH", path, body=bad)
        assert status == 400, bad
        assert error["error"]["param"] == next(iter(bad))
    assert (await call(gateway, "PATCH", "/admin/keys/999", body={"name": "x"}))[0] == 404
    assert (await call(gateway, "GET", "/admin/keys/abc"))[0] == 404
    for digits_not_a_number in ("%C2%B3", "%E2%91%A0"):  # '³', '①': isdigit(), not int()
        assert (await call(gateway, "DELETE", f"/admin/keys/{digits_not_a_number}"))[0] == 404
        assert (await call(gateway, "GET", f"/admin/requests?key={digits_not_a_number}"))[0] < 500
    too_long = "1" * 5000  # more digits than int() reads (4,300)
    assert (await call(gateway, "DELETE", f"/admin/keys/{too_long}"))[0] == 404
    assert (await call(gateway, "GET", f"/admin/keys/{too_long}"))[0] == 404
    for query in ("key", "limit", "status"):
        assert (await call(gateway, "GET", f"/admin/requests?{query}={too_long}"))[0] == 400, query
    assert (await call(gateway, "GET", f"/admin/groups?limit={too_long}"))[0] == 400
    _, audit = await call(gateway, "GET", "/admin/audit?action=key.update")
    assert len(audit["data"]) == 3
    assert audit["data"][-1]["detail"]["name"] == "mobile app"
    assert key["key"] not in str(audit)


async def test_rotating_a_key_keeps_the_old_secret_for_the_grace_only(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    key = await _key(gateway, "team", name="ci")
    old = key["key"]
    status, rotated = await call(
        gateway, "POST", f"/admin/keys/{key['id']}/rotate", body={"grace_seconds": 1}
    )
    assert status == 200, rotated
    new = rotated["key"]
    assert new != old and rotated["id"] == key["id"] and rotated["prefix"] == new[:10]
    assert rotated["previous_secret_valid_until"]
    assert (await chat_status(gateway, old))[0] == 200
    assert (await chat_status(gateway, new))[0] == 200
    await gateway.services.refresh()
    assert (await chat_status(gateway, old))[0] == 200
    await asyncio.sleep(1.1)
    status, error = await chat_status(gateway, old)
    assert status == 401 and "replaced" in error["error"]["message"]
    assert (await chat_status(gateway, new))[0] == 200
    await gateway.flush_usage()
    _, usage = await call(gateway, "GET", f"/admin/usage?key={key['id']}")
    assert usage["total"]["requests"] == 4  # one key, whichever secret it was called with

    # a second rotation forgets the first secret at once, whatever the grace left
    _, again = await call(
        gateway, "POST", f"/admin/keys/{key['id']}/rotate", body={"grace_seconds": 600}
    )
    assert (await chat_status(gateway, old))[0] == 401
    assert (await chat_status(gateway, new))[0] == 200
    assert (await chat_status(gateway, again["key"]))[0] == 200
    await gateway.services.refresh()
    assert (await chat_status(gateway, old))[0] == 401
    _, immediate = await call(
        gateway, "POST", f"/admin/keys/{key['id']}/rotate", body={"grace_seconds": 0}
    )
    assert (await chat_status(gateway, again["key"]))[0] == 401
    assert (await chat_status(gateway, immediate["key"]))[0] == 200

    for bad in (-1, 31 * 86_400, "60", True):
        status, error = await call(
            gateway, "POST", f"/admin/keys/{key['id']}/rotate", body={"grace_seconds": bad}
        )
        assert status == 400 and error["error"]["param"] == "grace_seconds"
    assert (await call(gateway, "POST", "/admin/keys/999/rotate", body={}))[0] == 404
    _, audit = await call(gateway, "GET", "/admin/audit?action=key.rotate")
    assert len(audit["data"]) == 3
    assert all(secret not in str(audit) for secret in (old, new, again["key"]))


async def test_a_disabled_groups_keys_show_as_such(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    key = await _key(gateway, "team")
    await call(gateway, "POST", "/admin/groups/team/disable")
    _, shown = await call(gateway, "GET", f"/admin/keys/{key['id']}")
    assert shown["status"] == "group_disabled"
    _, listed = await call(gateway, "GET", "/admin/keys?status=group_disabled")
    assert [k["id"] for k in listed["data"]] == [key["id"]]
    await call(gateway, "POST", "/admin/groups/team/enable")
    _, shown = await call(gateway, "GET", f"/admin/keys/{key['id']}")
    assert shown["status"] == "active"


async def test_an_idempotency_key_creates_one_key_however_often_it_is_sent(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    once = {"Idempotency-Key": "form-7f3a"}
    body = {"group": "team", "name": "ci"}
    status, first = await call(gateway, "POST", "/admin/keys", body=body, headers=once)
    assert status == 201 and first["key"]
    replies = await asyncio.gather(
        *(call(gateway, "POST", "/admin/keys", body=body, headers=once) for _ in range(3))
    )
    for status, error in replies:
        assert status == 409 and error["error"]["code"] == "idempotency_key_reused"
        assert f"key {first['id']}" in error["error"]["message"]
        assert first["key"] not in str(error)
    _, listed = await call(gateway, "GET", "/admin/keys?group=team")
    assert [key["id"] for key in listed["data"]] == [first["id"]]
    status, _ = await call(
        gateway, "POST", "/admin/keys", body=body, headers={"Idempotency-Key": "other"}
    )
    assert status == 201
    status, error = await call(
        gateway, "POST", "/admin/keys", body=body, headers={"Idempotency-Key": "x" * 65}
    )
    assert status == 400 and error["error"]["param"] == "Idempotency-Key"


async def test_a_viewer_reads_a_key_but_an_operator_edits_and_rotates_it(
    start_gateway: Any,
) -> None:
    gateway = await staffed(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    key = await _key(gateway, "team")
    path = f"/admin/keys/{key['id']}"
    status, shown = await as_account(gateway, "vera", "GET", path)
    assert status == 200 and shown["id"] == key["id"]
    for method, target, body in (
        ("PATCH", path, {"name": "x"}),
        ("POST", f"{path}/rotate", {"grace_seconds": 0}),
    ):
        status, error = await as_account(gateway, "vera", method, target, body)
        assert status == 403, (method, target, error)
    status, changed = await as_account(gateway, "oscar", "PATCH", path, {"name": "ops"})
    assert status == 200 and changed["name"] == "ops"
    status, rotated = await as_account(gateway, "oscar", "POST", f"{path}/rotate", {})
    assert status == 200 and rotated["key"] != key["key"]
    _, audit = await call(gateway, "GET", "/admin/audit?actor=oscar&action=key.")
    assert [e["action"] for e in audit["data"]] == ["key.rotate", "key.update"]


async def test_the_quota_endpoint_shows_a_keys_own_budget(start_gateway: Any) -> None:
    """A caller whose key has a budget of its own reads it beside the group's: the group
    may have plenty left while this key is spent."""
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team", "budget_usd": 100})
    capped = await _key(gateway, "team", budget_usd=0.00000001)
    free = await _key(gateway, "team")
    assert (await chat_status(gateway, capped["key"]))[0] == 200
    assert (await chat_status(gateway, capped["key"]))[0] == 429

    _, quota = await call_as(gateway, "GET", "/v1/dashboard/billing/quota", capped["key"])
    assert quota["budget"]["limit_usd"] == 100 and quota["budget"]["remaining_usd"] > 99
    mine = quota["key_budget"]
    assert mine["limit_usd"] == 0.00000001 and mine["remaining_usd"] == 0
    assert mine["spent_usd"] > 0
    assert mine["period_end"] == quota["budget"]["period_end"]
    _, quota = await call_as(gateway, "GET", "/v1/dashboard/billing/quota", free["key"])
    assert quota["key_budget"] is None
