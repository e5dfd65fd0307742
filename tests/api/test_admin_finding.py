"""/admin lists that can be searched, sorted and paged: groups, keys, voices and the
audit log (by actor, action, target and time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from tests.api.admin_client import admin_gateway, call


async def _groups(gateway: Any, count: int) -> None:
    for index in range(count):
        status, _ = await call(
            gateway, "POST", "/admin/groups", body={"name": f"tenant-{index:03}"}
        )
        assert status == 201


async def test_groups_are_searched_sorted_and_paged(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await _groups(gateway, 30)
    await call(gateway, "POST", "/admin/groups", body={"name": "Acme.Corp"})

    status, page = await call(gateway, "GET", "/admin/groups?limit=10&sort=name")
    assert status == 200
    assert [g["name"] for g in page["data"]][:2] == ["Acme.Corp", "tenant-000"]
    assert page["total"] == 31 and page["next_offset"] == 10 and page["has_more"]
    _, last = await call(gateway, "GET", "/admin/groups?limit=10&offset=30&sort=name")
    assert [g["name"] for g in last["data"]] == ["tenant-029"] and last["next_offset"] is None

    _, found = await call(gateway, "GET", "/admin/groups?q=acme")
    assert [g["name"] for g in found["data"]] == ["Acme.Corp"] and found["total"] == 1
    _, found = await call(gateway, "GET", "/admin/groups?q=-02&sort=-name")
    assert [g["name"] for g in found["data"]][:2] == ["tenant-029", "tenant-028"]
    assert found["total"] == 10
    _, newest = await call(gateway, "GET", "/admin/groups?sort=created&order=desc&limit=1")
    assert newest["data"][0]["name"] == "Acme.Corp"
    _, everything = await call(gateway, "GET", "/admin/groups")
    assert len(everything["data"]) == 31  # without limit: up to 500 a page
    assert everything["data"][0]["name"] == "tenant-000"  # by id unless sorted otherwise
    assert everything["data"][-1]["name"] == "Acme.Corp"

    for query, param in (
        ("sort=budget", "sort"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("offset=-1", "offset"),
        ("order=up", "order"),
        ("q=" + "x" * 201, "q"),
        ("q=%00", "q"),
    ):
        status, error = await call(gateway, "GET", f"/admin/groups?{query}")
        assert status == 400 and error["error"]["param"] == param, query


async def test_keys_are_searched_by_label_prefix_and_group(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await _groups(gateway, 3)
    made = []
    for index, label in enumerate(("ci", "mobile app", "batch")):
        _, key = await call(
            gateway, "POST", "/admin/keys", body={"group": f"tenant-{index:03}", "name": label}
        )
        made.append(key)
    _, found = await call(gateway, "GET", "/admin/keys?q=MOBILE")
    assert [k["name"] for k in found["data"]] == ["mobile app"]
    _, found = await call(gateway, "GET", f"/admin/keys?q={quote(made[2]['prefix'])}")
    assert [k["id"] for k in found["data"]] == [made[2]["id"]]
    _, found = await call(gateway, "GET", "/admin/keys?q=tenant-000")
    assert [k["name"] for k in found["data"]] == ["ci"]
    _, ordered = await call(gateway, "GET", "/admin/keys?sort=name")
    assert [k["name"] for k in ordered["data"]] == ["batch", "ci", "mobile app"]
    _, newest = await call(gateway, "GET", "/admin/keys?sort=-created&limit=2")
    assert [k["name"] for k in newest["data"]] == ["batch", "mobile app"]
    assert newest["total"] == 3 and newest["next_offset"] == 2
    await call(gateway, "DELETE", f"/admin/keys/{made[0]['id']}")
    _, revoked = await call(gateway, "GET", "/admin/keys?status=revoked")
    assert [k["name"] for k in revoked["data"]] == ["ci"]
    _, one_group = await call(gateway, "GET", "/admin/keys?group=tenant-001")
    assert [k["name"] for k in one_group["data"]] == ["mobile app"]
    assert (await call(gateway, "GET", "/admin/keys?sort=secret"))[0] == 400


async def test_the_audit_log_is_filtered_and_paged(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await _groups(gateway, 5)
    _, key = await call(gateway, "POST", "/admin/keys", body={"group": "tenant-003"})
    await call(gateway, "POST", "/admin/groups/tenant-003/disable")

    _, created = await call(gateway, "GET", "/admin/audit?action=group.create&limit=2")
    assert [e["target"] for e in created["data"]] == ["tenant-004", "tenant-003"]
    next_page = created["next_before"]
    _, older = await call(
        gateway, "GET", f"/admin/audit?action=group.create&limit=2&before={next_page}"
    )
    assert [e["target"] for e in older["data"]] == ["tenant-002", "tenant-001"]

    _, on_tenant = await call(gateway, "GET", "/admin/audit?target=TENANT-003")
    assert [e["action"] for e in on_tenant["data"]] == ["group.disable", "group.create"]
    _, keys = await call(gateway, "GET", "/admin/audit?action=key.")
    assert [e["action"] for e in keys["data"]] == ["key.create"]
    _, by_token = await call(gateway, "GET", "/admin/audit?actor=token")
    assert len(by_token["data"]) == 7 and by_token["next_before"] is None
    _, nobody = await call(gateway, "GET", "/admin/audit?actor=session:nobody")
    assert nobody["data"] == []

    today = datetime.now(UTC).date()
    tomorrow = today + timedelta(days=1)
    _, window = await call(gateway, "GET", f"/admin/audit?since={today}&until={tomorrow}")
    assert len(window["data"]) == 7
    _, future = await call(gateway, "GET", f"/admin/audit?since={tomorrow}")
    assert future["data"] == []
    status, error = await call(gateway, "GET", "/admin/audit?since=yesterday")
    assert status == 400 and error["error"]["param"] == "since"
    assert key["key"] not in str(by_token)


async def test_voices_are_listed_as_pages(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    status, page = await call(gateway, "GET", "/admin/voices?q=anything&sort=-created")
    assert status == 200 and page["data"] == [] and page["total"] == 0
    assert page["next_offset"] is None
    assert (await call(gateway, "GET", "/admin/voices?sort=secret"))[0] == 400
