"""/admin groups and keys: disable and enable, budgets, names, key status and last use,
each change in the audit log."""

from __future__ import annotations

from typing import Any

from tests.api.admin_client import (
    ADMIN,
    admin_gateway,
    browser_session,
    call,
    chat_status,
    form_token,
    login,
)


async def test_a_disabled_groups_keys_are_refused_until_it_is_enabled(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    _, key = await call(gateway, "POST", "/admin/keys", body={"group": "team"})
    status, group = await call(gateway, "POST", "/admin/groups/team/disable")
    assert status == 200 and group["disabled"] and group["disabled_at"]
    status, error = await chat_status(gateway, key["key"])
    assert status == 403 and error["error"]["code"] == "group_disabled"
    await gateway.services.refresh()  # a directory refresh keeps it disabled
    assert (await chat_status(gateway, key["key"]))[0] == 403
    status, group = await call(gateway, "POST", "/admin/groups/team/enable")
    assert status == 200 and not group["disabled"]
    assert (await chat_status(gateway, key["key"]))[0] == 200
    assert (await call(gateway, "POST", "/admin/groups/nobody/disable"))[0] == 404


async def test_group_names_are_checked_and_a_zero_budget_blocks_calls(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    for bad in ("", "has space", "-leading", "x" * 65, "naïve", "a/b"):
        status, error = await call(gateway, "POST", "/admin/groups", body={"name": bad})
        assert status == 400 and error["error"]["param"] == "name", bad
        assert "letters" in error["error"]["message"]
    status, group = await call(
        gateway, "POST", "/admin/groups", body={"name": "Team_1.a-b", "budget_usd": 0}
    )
    assert status == 201 and group["budget_usd"] == 0
    _, key = await call(gateway, "POST", "/admin/keys", body={"group": "Team_1.a-b"})
    status, error = await chat_status(gateway, key["key"])
    assert status == 429 and error["error"]["code"] == "insufficient_quota"
    status, group = await call(
        gateway, "PATCH", "/admin/groups/Team_1.a-b", body={"budget_usd": None}
    )
    assert status == 200 and group["budget_usd"] is None
    assert (await chat_status(gateway, key["key"]))[0] == 200


async def test_one_group_shows_its_budget_and_spend_this_period(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team", "budget_usd": 1})
    _, key = await call(gateway, "POST", "/admin/keys", body={"group": "team"})
    assert (await chat_status(gateway, key["key"]))[0] == 200
    status, group = await call(gateway, "GET", "/admin/groups/team")
    assert status == 200
    budget = group["budget"]
    assert budget["period"] == "month" and budget["limit_usd"] == 1.0
    assert 0 < budget["spent_usd"] < 1 and budget["remaining_usd"] < 1


async def test_keys_show_status_expiry_and_last_use_never_the_secret(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    _, used = await call(gateway, "POST", "/admin/keys", body={"group": "team", "name": "used"})
    _, later = await call(
        gateway, "POST", "/admin/keys", body={"group": "team", "expires_in_days": 7}
    )
    assert later["status"] == "active" and later["expires_at"]
    assert (await chat_status(gateway, used["key"]))[0] == 200
    await gateway.flush_usage()
    await call(gateway, "DELETE", f"/admin/keys/{later['id']}")
    status, listed = await call(gateway, "GET", "/admin/keys?group=team")
    assert status == 200
    by_id = {key["id"]: key for key in listed["data"]}
    assert by_id[used["id"]]["last_used_at"] is not None
    assert by_id[used["id"]]["status"] == "active" and by_id[used["id"]]["group"] == "team"
    assert by_id[later["id"]]["status"] == "revoked" and by_id[later["id"]]["last_used_at"] is None
    assert all("key" not in key for key in listed["data"])
    status, error = await call(gateway, "POST", "/admin/keys", body={"group": "nobody"})
    assert status == 400 and "The groups are: team." in error["error"]["message"]


async def test_every_change_is_in_the_audit_log_with_who_and_where(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team", "rpm": 5})
    await call(gateway, "PATCH", "/admin/groups/team", body={"tpm": 100})
    await call(gateway, "POST", "/admin/groups/team/disable")
    await call(gateway, "POST", "/admin/groups/team/enable")
    _, key = await call(gateway, "POST", "/admin/keys", body={"group": "team"})
    await call(gateway, "DELETE", f"/admin/keys/{key['id']}")
    status, log = await call(gateway, "GET", "/admin/audit")
    assert status == 200
    actions = [entry["action"] for entry in log["data"]]
    assert actions == [
        "key.revoke",
        "key.create",
        "group.enable",
        "group.disable",
        "group.update",
        "group.create",
    ]
    assert {entry["actor"] for entry in log["data"]} == {"token"}
    assert {entry["address"] for entry in log["data"]} == {"127.0.0.1"}
    assert log["data"][-1]["detail"]["rpm"] == 5
    assert key["key"] not in repr(log)
    status, page = await call(gateway, "GET", f"/admin/audit?limit=2&before={log['data'][1]['id']}")
    assert [entry["action"] for entry in page["data"]] == ["group.enable", "group.disable"]


async def test_dashboard_forms_use_the_same_rules_and_clear_empty_fields(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    base = gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        csrf = await form_token(session, base)
        form = {
            "csrf": csrf,
            "name": "team",
            "rpm": "10",
            "budget_usd": "0",
            "models": "chat-large",
        }
        async with session.post(f"{base}/admin/ui/groups", data=form) as created:
            assert created.status == 200 and created.url.path == "/admin/ui/groups/team"
        group = await gateway.services.store.get_group("team")
        assert group is not None and group.quota.rpm == 10 and group.budget_nanos == 0
        assert group.models == frozenset({"chat-large"})
        cleared = {"csrf": csrf, "rpm": "", "tpm": "", "budget_usd": "", "models": "*"}
        async with session.post(f"{base}/admin/ui/groups/team", data=cleared) as updated:
            assert updated.status == 200
        group = await gateway.services.store.get_group("team")
        assert group is not None and (group.quota.rpm, group.budget_nanos, group.models) == (
            None,
            None,
            None,
        )
        bad = {"csrf": csrf, "name": "bad name"}
        async with session.post(f"{base}/admin/ui/groups", data=bad) as refused:
            assert refused.status == 400 and "letters A-Z" in await refused.text()
    _, log = await call(gateway, "GET", "/admin/audit")
    assert [e["action"] for e in log["data"][:2]] == ["group.update", "group.create"]
    assert log["data"][0]["actor"] == "token"  # signed in with the admin token
