"""The dashboard's key and group forms over plain HTTP: errors shown beside their field
with what was typed kept, a key form sent twice making one key, a key page that edits
and rotates (a reload rotates nothing), and the groups list searched and paged."""

from __future__ import annotations

import re
from typing import Any

import aiohttp

from tests.api.admin_client import (
    ADMIN,
    admin_gateway,
    browser_session,
    call,
    chat_status,
    form_token,
    hidden,
    login,
)


async def _page(session: aiohttp.ClientSession, url: str) -> str:
    async with session.get(url) as reply:
        assert reply.status == 200, url
        return await reply.text()


async def test_a_failed_form_keeps_what_was_typed_and_marks_the_field(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    base = gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        csrf = await form_token(session, base)
        form = {"csrf": csrf, "name": "acme-corp", "rpm": "ten", "budget_usd": "2.5"}
        async with session.post(f"{base}/admin/ui/groups", data=form) as refused:
            html = await refused.text()
        assert refused.status == 400
        assert 'id="new-group-name" name="name" type="text" value="acme-corp"' in html
        assert 'value="2.5"' in html
        rpm = re.search(r'<input id="new-group-rpm"[^>]*>', html)
        assert rpm and 'value="ten"' in rpm.group(0) and 'aria-invalid="true"' in rpm.group(0)
        assert 'id="new-group-rpm-error"' in html and "whole number from 1 to" in html
        assert await gateway.services.store.get_group("acme-corp") is None

        bad_name = {"csrf": csrf, "name": "acme corp", "rpm": "5"}
        async with session.post(f"{base}/admin/ui/groups", data=bad_name) as refused:
            html = await refused.text()
        assert refused.status == 400 and 'id="new-group-name-error"' in html
        assert 'value="acme corp"' in html and 'value="5"' in html


async def test_a_key_form_sent_twice_makes_one_key(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    base = gateway.base_url
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    async with browser_session() as session:
        await login(session, base, ADMIN)
        html = await _page(session, f"{base}/admin/ui/groups/team")
        form = {
            "csrf": hidden(html, "csrf"),
            "idempotency_key": hidden(html, "idempotency_key"),
            "name": "ci",
            "budget_usd": "0.5",
            "models": "chat-large",
        }
        async with session.post(f"{base}/admin/ui/groups/team/keys", data=form) as made:
            shown = await made.text()
        assert made.status == 200
        secret = re.search(r"data-new-key>(pk-[^<]+)<", shown)
        assert secret is not None
        async with session.post(f"{base}/admin/ui/groups/team/keys", data=form) as again:
            replay = await again.text()
        assert again.status == 200 and "data-replayed" in replay
        assert secret.group(1) not in replay and "data-new-key" not in replay
        keys = await gateway.services.store.list_keys()
        assert len(keys) == 1 and keys[0].name == "ci" and keys[0].budget_nanos == 500_000_000
        assert keys[0].models == frozenset({"chat-large"})
        fresh = hidden(await _page(session, f"{base}/admin/ui/groups/team"), "idempotency_key")
        assert fresh != form["idempotency_key"]


async def test_the_key_page_edits_and_rotates_once(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    base = gateway.base_url
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    _, key = await call(gateway, "POST", "/admin/keys", body={"group": "team", "name": "ci"})
    url = f"{base}/admin/ui/keys/{key['id']}"
    async with browser_session() as session:
        await login(session, base, ADMIN)
        csrf = await form_token(session, base)
        edit = {"csrf": csrf, "name": "mobile", "rpm": "", "budget_usd": "0", "models": "*"}
        async with session.post(url, data={**edit, "expires_on": "someday"}) as refused:
            html = await refused.text()
        assert refused.status == 400 and 'id="key-expires_on-error"' in html
        assert 'value="mobile"' in html
        async with session.post(url, data={**edit, "expires_on": "2099-12-31"}) as saved:
            assert saved.status == 200 and "Saved." in await saved.text()
        assert (await chat_status(gateway, key["key"]))[0] == 429  # a budget of 0
        record = (await gateway.services.store.list_keys())[0]
        assert record.name == "mobile" and record.expires_at is not None
        assert record.expires_at.year == 2099

        page = await _page(session, url)
        rotate = {"csrf": csrf, "prefix": hidden(page, "prefix"), "grace_minutes": "5"}
        async with session.post(f"{url}/rotate", data=rotate) as rotated:
            html = await rotated.text()
        new = re.search(r"data-new-key>(pk-[^<]+)<", html)
        assert rotated.status == 200 and new is not None and "keeps working until" in html
        async with session.post(f"{url}/rotate", data=rotate) as reloaded:
            html = await reloaded.text()
        assert "already rotated" in html and "data-new-key" not in html
        assert (await gateway.services.store.list_keys())[0].prefix == new.group(1)[:10]
        async with session.post(
            f"{url}/rotate", data={**rotate, "prefix": new.group(1)[:10], "grace_minutes": "-3"}
        ) as bad:
            assert bad.status == 400 and 'id="rotate-grace_minutes-error"' in await bad.text()


async def test_the_groups_page_is_searched_and_paged(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    base = gateway.base_url
    for index in range(60):
        await gateway.services.store.create_group(f"tenant-{index:03}")
    await gateway.services.store.create_group("acme-industries")
    async with browser_session() as session:
        await login(session, base, ADMIN)
        first = await _page(session, f"{base}/admin/ui/groups")
        assert first.count('href="/admin/ui/groups/tenant-') == 49
        assert "61 groups" in first and "offset=50" in first
        second = await _page(session, f"{base}/admin/ui/groups?offset=50")
        assert "tenant-059" in second and "tenant-000" not in second
        found = await _page(session, f"{base}/admin/ui/groups?q=ACME")
        assert "acme-industries" in found and "tenant-001" not in found and "1 group " in found
        newest = await _page(session, f"{base}/admin/ui/groups?sort=-created")
        assert newest.index("acme-industries") < newest.index("tenant-059")
        async with session.get(f"{base}/admin/ui/groups?sort=bogus") as refused:
            assert refused.status == 400


async def test_the_keys_audit_usage_and_overview_pages_find_things(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    base = gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        overview = await _page(session, f"{base}/admin/")
        assert "data-first-day" in overview and "Getting started" in overview

        await call(gateway, "POST", "/admin/groups", body={"name": "alpha"})
        await call(gateway, "POST", "/admin/groups", body={"name": "beta"})
        _, ci = await call(gateway, "POST", "/admin/keys", body={"group": "alpha", "name": "ci"})
        _, app = await call(gateway, "POST", "/admin/keys", body={"group": "beta", "name": "app"})
        assert (await chat_status(gateway, ci["key"]))[0] == 200
        assert (await chat_status(gateway, app["key"]))[0] == 200
        await gateway.flush_usage()
        assert "data-first-day" not in await _page(session, f"{base}/admin/")

        keys = await _page(session, f"{base}/admin/ui/keys?q={app['prefix']}")
        assert f"/admin/ui/keys/{app['id']}" in keys and f"/admin/ui/keys/{ci['id']}" not in keys
        await call(gateway, "POST", "/admin/groups/beta/disable")
        disabled = await _page(session, f"{base}/admin/ui/keys?status=group_disabled")
        assert f"/admin/ui/keys/{app['id']}" in disabled and "group disabled" in disabled
        assert f"/admin/ui/keys/{ci['id']}" not in disabled

        audit = await _page(session, f"{base}/admin/ui/audit?action=key.&target=")
        assert audit.count('<span class="pill">key.create</span>') == 2
        assert "group.create</span>" not in audit
        on_beta = await _page(session, f"{base}/admin/ui/audit?target=beta")
        assert "group.disable</span>" in on_beta and "alpha" not in on_beta
        async with session.get(f"{base}/admin/ui/audit?since=nope") as bad:
            assert bad.status == 200 and "ISO 8601" in await bad.text()

        usage = await _page(session, f"{base}/admin/ui/usage?by=key")
        assert "data-usage-charts" in usage and "Spend by key" in usage
        assert f"{ci['prefix']}… ci" in usage and f"{app['prefix']}… app" in usage
        one = await _page(session, f"{base}/admin/ui/usage?key={ci['id']}&by=model")
        assert "data-key-filter" in one and f'name="key" value="{ci["id"]}"' in one
        key_page = await _page(session, f"{base}/admin/ui/keys/{ci['id']}")
        assert "data-key-usage" in key_page and "chat-large" in key_page


async def test_saving_a_key_with_its_expiry_date_as_shown_keeps_its_time(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    base = gateway.base_url
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    _, key = await call(
        gateway, "POST", "/admin/keys", body={"group": "team", "expires_in_days": 7}
    )
    before = (await gateway.services.store.list_keys())[0].expires_at
    assert before is not None
    async with browser_session() as session:
        await login(session, base, ADMIN)
        page = await _page(session, f"{base}/admin/ui/keys/{key['id']}")
        assert f'value="{before.date().isoformat()}"' in page
        form = {
            "csrf": hidden(page, "csrf"),
            "name": "renamed",
            "expires_on": before.date().isoformat(),
            "models": "*",
        }
        async with session.post(f"{base}/admin/ui/keys/{key['id']}", data=form) as saved:
            assert saved.status == 200
    after = (await gateway.services.store.list_keys())[0]
    assert after.name == "renamed" and after.expires_at == before
