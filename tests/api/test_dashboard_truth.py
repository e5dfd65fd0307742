"""The dashboard never misleads (issue 41, item 5), through the admin API and the pages.

A rotated key's old request-log lines keep the prefix of the secret that made them, and
that prefix still finds the key; a key's own rate limit is named as the key's; a group
or key over its budget says so, and the overview names the top spenders and the groups
nearest their budget; a failed call's line says why (the upstream's status and its
message, redacted) and names no model "that answered"; times of a grace are to the
second, the filters offer 403 and every audited action, and ``key.update`` records what
changed, before and after.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from parley.domain.audit import ACTIONS
from tests.api.admin_client import (
    ADMIN,
    admin_gateway,
    browser_session,
    call,
    chat_status,
    login,
)
from tests.api.harness import CHANNEL_KEY, Gateway

REPO = Path(__file__).resolve().parents[2]


async def _key(gateway: Gateway, group: str, **settings: Any) -> dict[str, Any]:
    status, made = await call(
        gateway, "POST", "/admin/keys", body={"group": group, "name": "ci", **settings}
    )
    assert status == 201, made
    return dict(made)


async def _lines(gateway: Gateway, query: str = "") -> list[dict[str, Any]]:
    await gateway.flush_usage()
    status, page = await call(gateway, "GET", f"/admin/requests{query}")
    assert status == 200, page
    return list(page["data"])


async def _page(gateway: Gateway, path: str) -> str:
    async with browser_session() as session:
        await login(session, gateway.base_url, ADMIN)
        async with session.get(f"{gateway.base_url}{path}") as reply:
            assert reply.status == 200, path
            return await reply.text()


async def test_rotation_keeps_each_lines_prefix_and_an_old_prefix_finds_its_key(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    made = await _key(gateway, "team")
    old, old_prefix = made["key"], made["prefix"]
    assert (await chat_status(gateway, old))[0] == 200

    path = f"/admin/keys/{made['id']}/rotate"
    status, rotated = await call(gateway, "POST", path, body={"grace_seconds": 600})
    assert status == 200 and rotated["former_prefixes"] == [old_prefix]
    new, new_prefix = rotated["key"], rotated["prefix"]
    assert (await chat_status(gateway, old))[0] == 200  # in its grace
    assert (await chat_status(gateway, new))[0] == 200

    lines = await _lines(gateway)
    assert [line["key"]["prefix"] for line in lines] == [new_prefix, old_prefix, old_prefix]
    assert {line["key"]["id"] for line in lines} == {made["id"]}

    status, found = await call(gateway, "GET", f"/admin/keys?q={old_prefix}")
    assert status == 200 and [key["id"] for key in found["data"]] == [made["id"]]
    by_old = await _lines(gateway, f"?key={old_prefix}")
    assert len(by_old) == 3  # the key's lines, whichever secret made them
    status, error = await call(gateway, "GET", "/admin/requests?key=pk-nobody-has")
    assert status == 404 and error["error"]["param"] == "key"

    _, audit = await call(gateway, "GET", "/admin/audit?action=key.rotate")
    assert audit["data"][0]["detail"]["old_prefix"] == old_prefix

    html = await _page(gateway, "/admin/ui/requests")
    assert html.count(f">{old_prefix}<") == 2 and html.count(f">{new_prefix}<") == 1
    keys = await _page(gateway, f"/admin/ui/keys?q={old_prefix}")
    assert f"/admin/ui/keys/{made['id']}" in keys and "1 key match" in keys


async def test_a_keys_own_rate_limit_is_named_as_the_keys(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "roomy", "rpm": 100})
    await call(gateway, "POST", "/admin/groups", body={"name": "tight", "rpm": 1})
    own = (await _key(gateway, "roomy", rpm=1))["key"]
    shared = (await _key(gateway, "tight"))["key"]
    for key in (own, shared):
        assert (await chat_status(gateway, key))[0] == 200

    status, refused = await chat_status(gateway, own)
    assert status == 429
    assert "1 requests per minute for this key" in refused["error"]["message"]
    status, refused = await chat_status(gateway, shared)
    assert status == 429
    assert "1 requests per minute for your group" in refused["error"]["message"]

    lines = await _lines(gateway, "?status=429")
    details = sorted(line["error_detail"] for line in lines)
    assert "for this key" in details[0] or "for this key" in details[1]
    assert any("for your group" in detail for detail in details)


async def test_over_budget_is_flagged_and_the_overview_names_the_spenders(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "spent", "budget_usd": 0.00000005})
    await call(gateway, "POST", "/admin/groups", body={"name": "roomy", "budget_usd": 1000})
    await call(gateway, "POST", "/admin/groups", body={"name": "free"})
    spender = await _key(gateway, "spent")
    capped = await _key(gateway, "free", budget_usd=0.00000005)
    for key in (spender, capped):
        assert (await chat_status(gateway, key["key"]))[0] == 200
        assert (await chat_status(gateway, key["key"]))[0] == 429
    await gateway.flush_usage()

    _, group = await call(gateway, "GET", "/admin/groups/spent")
    assert group["budget"]["state"] == "over"
    _, group = await call(gateway, "GET", "/admin/groups/roomy")
    assert group["budget"]["state"] == "ok"
    _, key = await call(gateway, "GET", f"/admin/keys/{capped['id']}")
    assert key["budget"]["state"] == "over"

    status, overview = await call(gateway, "GET", "/admin/overview")
    assert status == 200
    spend = overview["spend"]
    assert {row["name"] for row in spend["top_groups"]} == {"spent", "free"}
    assert len(spend["top_keys"]) == 2
    nearest = spend["nearest_budget"]
    assert [row["name"] for row in nearest] == ["spent", "roomy"]
    assert nearest[0]["state"] == "over"

    page = await _page(gateway, "/admin/")
    assert "Top spenders" in page and "Groups nearest their budget" in page
    assert 'data-budget-state="over"' in page and "over budget" in page
    groups = await _page(gateway, "/admin/ui/groups")
    row = re.search(r">spent</a>.*?</tr>", groups, re.S)
    assert row is not None and "over budget" in row.group(0) and "pill off" in row.group(0)
    keys = await _page(gateway, "/admin/ui/keys")
    assert keys.count('data-budget-state="over"') == 1  # the capped key; the other has none
    key_page = await _page(gateway, f"/admin/ui/keys/{capped['id']}")
    assert 'data-budget-notice="over"' in key_page and "Over budget" in key_page


async def test_a_failed_call_says_why_and_names_no_model_that_answered(
    start_gateway: Any,
) -> None:
    def broken(config: dict[str, Any]) -> None:
        config["admin"] = {"token": ADMIN}
        config["channels"][0]["models"].append({"name": "chat-broken", "upstream": "fail-502+leak"})
        config["models"].append({"name": "chat-broken", "kind": "chat"})

    gateway = await start_gateway(broken)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    key = (await _key(gateway, "team"))["key"]
    body = {"model": "chat-broken", "messages": [{"role": "user", "content": "hi"}]}
    status, _ = await call(gateway, "POST", "/v1/chat/completions", key, body=body)
    assert status == 502
    assert (await chat_status(gateway, key))[0] == 200

    failed, answered = sorted(await _lines(gateway), key=lambda line: -line["status"])
    detail = failed["error_detail"]
    assert detail.startswith("The upstream answered 502: Fake engine failure (status 502).")
    assert CHANNEL_KEY not in detail and "[redacted]" in detail
    assert answered["error_detail"] is None

    page = await _page(gateway, f"/admin/ui/requests/{failed['request_id']}")
    assert "Why it failed" in page and "The upstream answered 502" in page
    assert "Model that answered" not in page and "Model it was sent to" in page
    assert CHANNEL_KEY not in page
    page = await _page(gateway, f"/admin/ui/requests/{answered['request_id']}")
    assert "Model that answered" in page and "Why it failed" not in page


async def test_grace_to_the_second_filters_complete_and_key_updates_say_what_changed(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team", "rpm": 60})
    made = await _key(gateway, "team", rpm=60)
    path = f"/admin/keys/{made['id']}"
    status, rotated = await call(gateway, "POST", f"{path}/rotate", body={"grace_seconds": 30})
    until = rotated["previous_secret_valid_until"]
    page = await _page(gateway, f"/admin/ui/keys/{made['id']}")
    shown = until[:10] + " " + until[11:19] + " UTC"  # to the second
    assert f"accepted until {shown}" in page

    status, _ = await call(gateway, "PATCH", path, body={"rpm": 4, "models": ["chat-large"]})
    assert status == 200
    _, audit = await call(gateway, "GET", "/admin/audit?action=key.update")
    changed = audit["data"][0]["detail"]["changed"]
    assert changed == {
        "rpm": {"before": 60, "after": 4},
        "models": {"before": None, "after": ["chat-large"]},
    }
    await call(gateway, "PATCH", "/admin/groups/team", body={"rpm": 30})
    _, audit = await call(gateway, "GET", "/admin/audit?action=group.update")
    assert audit["data"][0]["detail"]["changed"] == {"rpm": {"before": 60, "after": 30}}
    log = await _page(gateway, "/admin/ui/audit?action=key.update")
    assert "rpm: 60 → 4" in log and "models: none → chat-large" in log
    key_page = await _page(gateway, f"/admin/ui/keys/{made['id']}")
    assert "4 requests per minute for this key (its group's: 30)" in key_page

    requests = await _page(gateway, "/admin/ui/requests")
    assert '<option value="403"' in requests or "<option>403</option>" in requests
    audit_page = await _page(gateway, "/admin/ui/audit")
    offered = set(re.findall(r'<option value="([^"]+)"', audit_page))
    for action, _ in ACTIONS:
        assert action in offered, action
    for family in ("channel.", "account.", "alert.", "session.", "key.", "group."):
        assert family in offered


def test_every_audited_action_is_one_the_filter_knows() -> None:
    """Every action written anywhere in the code is in ``ACTIONS`` (the audit page's
    filter), so a new action cannot be left out of it."""
    known = {action for action, _ in ACTIONS}
    written: set[str] = set()
    patterns = (
        re.compile(r'\baudit\(\s*"([a-z_]+\.[a-z_]+)"'),
        re.compile(r'"([a-z]+\.[a-z_]+)" if \w+ else "([a-z]+\.[a-z_]+)"'),
        re.compile(r'_audit\(request, [^"\n]+, "([a-z_]+\.[a-z_]+)"'),
    )
    for source in (REPO / "parley").rglob("*.py"):
        text = source.read_text()
        for pattern in patterns:
            for found in pattern.findall(text):
                written.update(found if isinstance(found, tuple) else (found,))
    alert_kinds = re.findall(
        r'raise_alert\(\s*"([a-z_]+\.[a-z_]+)"|_crossed\(\s*"([a-z_]+\.[a-z_]+)"',
        (REPO / "parley/runtime/alerts.py").read_text(),
    )
    written.update(f"alert.{kind}" for pair in alert_kinds for kind in pair if kind)
    assert {"channel.create", "account.delete", "session.logout", "alert.budget.key"} <= written
    assert written <= known, sorted(written - known)


async def test_keys_are_created_from_the_keys_page(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    base = gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        async with session.get(f"{base}/admin/ui/keys") as reply:
            html = await reply.text()
        assert "data-create-key" in html
        token = re.search(r'name="csrf" value="([^"]+)"', html)
        idem = re.search(r'name="idempotency_key" value="([^"]+)"', html)
        assert token and idem
        form = {
            "csrf": token.group(1),
            "idempotency_key": idem.group(1),
            "group": "team",
            "name": "from-keys",
            "rpm": "7",
            "budget_usd": "2.5",
            "models": "chat-large",
        }
        async with session.post(f"{base}/admin/ui/keys", data=form) as reply:
            made = await reply.text()
            assert reply.status == 200
        secret = re.search(r"data-new-key>(pk-[^<]+)<", made)
        assert secret is not None
        assert (await chat_status(gateway, secret.group(1)))[0] == 200
        async with session.post(
            f"{base}/admin/ui/keys", data={**form, "group": "", "idempotency_key": "other"}
        ) as reply:
            assert reply.status == 400 and "Choose the group" in await reply.text()
        async with session.get(f"{base}/admin/ui/keys") as reply:
            listed = await reply.text()
    assert "7 req/min" in listed and "$2.50" in listed and "chat-large" in listed
    _, keys = await call(gateway, "GET", "/admin/keys?group=team")
    assert [(k["name"], k["rpm"], k["budget_usd"]) for k in keys["data"]] == [("from-keys", 7, 2.5)]


async def test_the_voices_tab_shows_only_with_a_speech_model(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    page = await _page(gateway, "/admin/")
    assert 'href="/admin/ui/groups"' in page and 'href="/admin/ui/voices"' not in page
    assert "Voices" in await _page(gateway, "/admin/ui/voices")  # the page still answers

    def speech(config: dict[str, Any]) -> None:
        config["admin"] = {"token": ADMIN}
        config["channels"][0]["models"].append({"name": "tts-small"})
        config["models"].append({"name": "tts-small", "kind": "speech"})

    spoken = await start_gateway(speech)
    assert 'href="/admin/ui/voices"' in await _page(spoken, "/admin/")
