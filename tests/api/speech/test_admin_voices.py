"""GET /admin/voices and DELETE /admin/voices/{model}/{voice_id}: the operator sees every
group's clones and deletes one on its engine (the /v1 path's own job) and in the registry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.api.admin_client import ADMIN, browser_session, call, hidden, login
from tests.api.harness import Gateway
from tests.api.speech.conftest import Engines, Tenants, speech_config
from tests.api.speech.test_voice_clones import clone
from tests.clips import clip


@pytest.fixture
async def admin_tenants(engines: Engines, tmp_path: Path) -> AsyncIterator[Tenants]:
    config = speech_config(engines, "http://127.0.0.1:9/v1", tmp_path)
    config["admin"] = {"token": ADMIN}
    gateway = await Gateway.start(config)
    try:
        group_a, group_b = await gateway.group("alpha"), await gateway.group("beta")
        key_a, key_b = await gateway.key(group_a), await gateway.key(group_b)
        yield Tenants(gateway, engines, key_a, key_b, group_a.id, group_b.id)
    finally:
        await gateway.stop()


async def _two_clones(tenants: Tenants) -> tuple[str, str]:
    status_a, voice_a = await clone(
        tenants, tenants.key_a, clip("wav", 4.0), label="Anna", extra={"consent": "cons_1"}
    )
    status_b, voice_b = await clone(tenants, tenants.key_b, clip("wav", 5.0), label="Bert")
    assert (status_a, status_b) == (200, 200), (voice_a, voice_b)
    return voice_a["id"], voice_b["id"]


async def test_the_admin_lists_every_groups_clones_and_filters_them(
    admin_tenants: Tenants,
) -> None:
    tenants = admin_tenants
    id_a, id_b = await _two_clones(tenants)
    status, body = await call(tenants.gateway, "GET", "/admin/voices")
    assert status == 200, body
    rows = {(row["group"], row["model"], row["id"], row["label"]) for row in body["data"]}
    assert rows == {("alpha", "tts-pro", id_a, "Anna"), ("beta", "tts-pro", id_b, "Bert")}
    consents = {row["id"]: row["consent"] for row in body["data"]}
    assert consents == {id_a: "cons_1", id_b: None}
    durations = sorted(row["duration_seconds"] for row in body["data"])
    assert durations == [pytest.approx(4.0, abs=0.1), pytest.approx(5.0, abs=0.1)]
    _, only_b = await call(tenants.gateway, "GET", "/admin/voices?group=beta")
    assert [row["id"] for row in only_b["data"]] == [id_b]
    _, other_model = await call(tenants.gateway, "GET", "/admin/voices?model=tts-fast")
    assert other_model["data"] == []
    status, missing = await call(tenants.gateway, "GET", "/admin/voices?group=nobody")
    assert status == 404 and missing["error"]["param"] == "name"


async def test_the_admin_deletes_a_clone_on_its_engine_and_in_the_registry(
    admin_tenants: Tenants,
) -> None:
    tenants = admin_tenants
    id_a, id_b = await _two_clones(tenants)
    assert set(tenants.engines.omni.uploaded) == {id_a.lower(), id_b.lower()}
    status, body = await call(tenants.gateway, "DELETE", f"/admin/voices/tts-pro/{id_b}")
    assert status == 200, body
    assert body["deleted"] is True and body["id"] == id_b and body["group"] == "beta"
    assert set(tenants.engines.omni.uploaded) == {id_a.lower()}
    stored = await tenants.gateway.services.store.list_clones()
    assert [c.voice_id for c in stored] == [id_a]
    _, listed = await call(tenants.gateway, "GET", "/admin/voices")
    assert [row["id"] for row in listed["data"]] == [id_a]
    _, log = await call(tenants.gateway, "GET", "/admin/audit")
    entry = log["data"][0]
    assert entry["action"] == "voice.delete" and id_b in entry["target"]
    assert entry["detail"]["group"] == "beta" and entry["actor"] == "token"
    # the group can clone the label again: the registry is clean on this instance too
    assert (await clone(tenants, tenants.key_b, clip("wav", 4.0), label="Bert"))[0] == 200


async def test_a_voice_the_engine_lost_is_still_removed_from_the_registry(
    admin_tenants: Tenants,
) -> None:
    tenants = admin_tenants
    id_a, _ = await _two_clones(tenants)
    tenants.engines.omni.uploaded.clear()
    status, body = await call(tenants.gateway, "DELETE", f"/admin/voices/tts-pro/{id_a}")
    assert status == 200, body
    stored = await tenants.gateway.services.store.list_clones(group_id=tenants.group_a)
    assert stored == []


async def test_unknown_voices_are_404_and_group_keys_are_refused(
    admin_tenants: Tenants,
) -> None:
    tenants = admin_tenants
    id_a, _ = await _two_clones(tenants)
    gateway = tenants.gateway
    for path in (
        f"/admin/voices/tts-pro/g{tenants.group_a}__nobody",
        "/admin/voices/tts-pro/vivian",
        f"/admin/voices/tts-fast/{id_a}",
        f"/admin/voices/no-such-model/{id_a}",
    ):
        status, body = await call(gateway, "DELETE", path)
        assert status == 404 and body["error"]["code"] == "voice_not_found", (path, body)
    for method, path in (("GET", "/admin/voices"), ("DELETE", f"/admin/voices/tts-pro/{id_a}")):
        status, body = await call(gateway, method, path, token=tenants.key_a)
        assert status == 401 and "error" in body
    assert len(tenants.engines.omni.uploaded) == 2
    assert len(await gateway.services.store.list_clones()) == 2


async def test_the_dashboard_lists_voices_and_deletes_one_with_its_csrf_token(
    admin_tenants: Tenants,
) -> None:
    tenants = admin_tenants
    id_a, id_b = await _two_clones(tenants)
    base = tenants.gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        async with session.get(f"{base}/admin/ui/voices") as page:
            html = await page.text()
        assert page.status == 200 and id_a in html and id_b in html and "beta" in html
        assert 'href="/admin/ui/voices" aria-current="page"' in html
        action = f"{base}/admin/ui/voices/tts-pro/{id_b}/delete"
        async with session.post(action, data={"back": "/admin/ui/voices"}) as forged:
            assert forged.status == 403
        assert len(tenants.engines.omni.uploaded) == 2
        async with session.get(f"{base}/admin/ui/voices?group=beta") as page:
            html = await page.text()
        assert id_b in html and id_a not in html
        form = {"csrf": hidden(html, "csrf"), "back": "/admin/ui/voices?group=beta"}
        async with session.post(action, data=form) as deleted:
            assert deleted.status == 200 and deleted.url.query.get("group") == "beta"
            assert "No cloned voices match these filters" in await deleted.text()
    assert set(tenants.engines.omni.uploaded) == {id_a.lower()}
    _, log = await call(tenants.gateway, "GET", "/admin/audit")
    assert log["data"][0]["action"] == "voice.delete"
    assert log["data"][0]["actor"] == "token"  # signed in with the admin token


async def test_the_admin_sees_a_models_builtin_roster_and_searches_clones(
    admin_tenants: Tenants,
) -> None:
    tenants = admin_tenants
    id_a, id_b = await _two_clones(tenants)
    status, roster = await call(tenants.gateway, "GET", "/admin/voices/roster?model=tts-pro")
    assert status == 200, roster
    ids = [voice["id"] for voice in roster["data"]]
    assert ids == ["vivian", "ryan", "aiden", "serena"]  # no group's clone among them
    assert roster["data"][0]["label"] == "Vivian" and roster["data"][0]["builtin"]
    for model, code in (("tts-plain", "voices_not_supported"), ("nope", "model_not_found")):
        status, error = await call(tenants.gateway, "GET", f"/admin/voices/roster?model={model}")
        assert status == 404 and error["error"]["code"] == code, model
    assert (await call(tenants.gateway, "GET", "/admin/voices/roster"))[0] == 400

    _, found = await call(tenants.gateway, "GET", "/admin/voices?q=bert")
    assert [row["id"] for row in found["data"]] == [id_b] and found["total"] == 1
    _, ordered = await call(tenants.gateway, "GET", "/admin/voices?sort=-created&limit=1")
    assert [row["id"] for row in ordered["data"]] == [id_b] and ordered["next_offset"] == 1
    _, by_group = await call(tenants.gateway, "GET", "/admin/voices?q=ALPHA")
    assert [row["id"] for row in by_group["data"]] == [id_a]


async def test_the_voices_page_shows_a_models_roster_and_finds_clones(
    admin_tenants: Tenants,
) -> None:
    tenants = admin_tenants
    id_a, id_b = await _two_clones(tenants)
    base = tenants.gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        async with session.get(f"{base}/admin/ui/voices?model=tts-pro") as page:
            html = await page.text()
        assert page.status == 200 and "data-roster" in html and "Vivian" in html
        assert id_a in html and id_b in html
        async with session.get(f"{base}/admin/ui/voices?q=anna") as page:
            html = await page.text()
        assert id_a in html and id_b not in html and "data-roster" not in html
        async with session.get(f"{base}/admin/ui/voices?model=tts-plain") as page:
            html = await page.text()
        assert "no voices to list" in html
