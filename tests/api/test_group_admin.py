"""A group's own administrator (``group-admin``): every /admin route, API and dashboard,
called by one inside their group and outside it, read from the route table itself, so
a route nobody decided for fails here; keys within the group's limits; owners make
group-admin accounts; every action audited under the group-admin's name."""

from __future__ import annotations

import base64
import json
import re
import secrets
from pathlib import Path
from typing import Any

import aiohttp
from click.testing import CliRunner

from parley.admin.roles import (
    GROUP,
    GROUP_ADMIN_ROUTES,
    HOME,
    KEY,
    OPEN_ROUTES,
    OWN,
    REFUSED,
    REQUEST,
)
from parley.admin.site import HANDLERS, is_dashboard
from parley.cli import cli
from tests.api.admin_client import ADMIN, admin_gateway, browser_session, call, chat_status, hidden
from tests.api.harness import Gateway
from tests.api.harness import call as call_as

MINE, THEIRS = "acme", "zeta-corp"
GINA, GINA_PASSWORD = "gina", "gina-group-admin-pw"
ACME_LIMITS = {"rpm": 60, "tpm": 50_000, "budget_usd": 20, "models": ["chat-large"]}


def basic(name: str = GINA, password: str = GINA_PASSWORD) -> dict[str, str]:
    secret = f"{name}:{password}".encode()
    return {"Authorization": "Basic " + base64.b64encode(secret).decode()}


async def as_gina(gateway: Gateway, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return await call_as(gateway, method, path, None, json=body, headers=basic())


async def new_key(gateway: Gateway, group: str) -> dict[str, Any]:
    status, key = await call(gateway, "POST", "/admin/keys", body={"group": group})
    assert status == 201, key
    return dict(key)


class World:
    """Two groups, a key and a logged call in each, and gina, acme's group-admin."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.theirs_key: dict[str, Any] = {}
        self.mine_request = ""
        self.theirs_request = ""
        self.mine_batch = ""
        self.theirs_batch = ""

    async def build(self) -> World:
        gateway = self.gateway
        for group, limits in ((MINE, ACME_LIMITS), (THEIRS, {})):
            status, made = await call(
                gateway, "POST", "/admin/groups", body={"name": group, **limits}
            )
            assert status == 201, made
        mine, self.theirs_key = await new_key(gateway, MINE), await new_key(gateway, THEIRS)
        assert (await chat_status(gateway, mine["key"]))[0] == 200
        assert (await chat_status(gateway, self.theirs_key["key"]))[0] == 200
        await gateway.flush_usage()
        self.mine_request = await self._request_of(MINE)
        self.theirs_request = await self._request_of(THEIRS)
        self.mine_batch = await batch_of(gateway, mine["key"])
        self.theirs_batch = await batch_of(gateway, self.theirs_key["key"])
        body = {"name": GINA, "role": "group-admin", "group": MINE, "password": GINA_PASSWORD}
        status, account = await call(gateway, "POST", "/admin/accounts", body=body)
        assert status == 201, account
        assert account["role"] == "group-admin" and account["group"] == MINE
        return self

    async def _request_of(self, group: str) -> str:
        status, page = await call(self.gateway, "GET", f"/admin/requests?group={group}")
        assert status == 200 and page["data"], page
        return str(page["data"][0]["request_id"])

    def secrets_of_theirs(self) -> list[str]:
        """What no page or answer of gina's may hold."""
        return [THEIRS, self.theirs_key["prefix"], self.theirs_request, self.theirs_batch]

    async def path(self, template: str, *, inside: bool) -> str:
        """``template`` with gina's things (a fresh key for each call) or another group's."""
        values = {
            "name": MINE if inside else THEIRS,
            "key_id": str((await new_key(self.gateway, MINE))["id"])
            if inside
            else str(self.theirs_key["id"]),
            "request_id": self.mine_request if inside else self.theirs_request,
            "batch_id": self.mine_batch if inside else self.theirs_batch,
            "model": "chat-large",
            "voice_id": "g1__voice",
            "deletion_id": "1",
        }
        return "/admin" + re.sub(r"\{([^}]+)\}", lambda m: values[m.group(1)], template)


async def batch_of(gateway: Gateway, key: str) -> str:
    """A batch of one line made with ``key`` (its group's), through /v1."""
    line = {
        "custom_id": "one",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]},
    }
    form = aiohttp.FormData()
    form.add_field("purpose", "batch")
    form.add_field("file", json.dumps(line).encode() + b"\n", filename="in.jsonl")
    status, made = await call_as(gateway, "POST", "/v1/files", key, data=form)
    assert status == 200, made
    body = {
        "input_file_id": made["id"],
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
    }
    status, batch = await call_as(gateway, "POST", "/v1/batches", key, json=body)
    assert status == 200, batch
    return str(batch["id"])


def decided(method: str, template: str) -> bool:
    return (method, template) in GROUP_ADMIN_ROUTES


def test_every_route_has_a_decision_for_group_admins() -> None:
    served = {(method, path) for method, path, _ in HANDLERS} - OPEN_ROUTES
    undecided = sorted(route for route in served if not decided(*route))
    assert not undecided, f"no group-admin decision in roles.GROUP_ADMIN_ROUTES: {undecided}"
    stale = sorted(set(GROUP_ADMIN_ROUTES) - served)
    assert not stale, f"GROUP_ADMIN_ROUTES lists routes nobody serves: {stale}"
    assert not decided("POST", "/keys/{key_id}/freeze")  # a new route: refused, undecided


async def _dashboard(session: aiohttp.ClientSession, base: str) -> str:
    """Sign gina in through the form; the CSRF token of her pages."""
    async with session.get(f"{base}/admin/login") as page:
        nonce = hidden(await page.text(), "nonce")
    form = {"nonce": nonce, "account": GINA, "token": GINA_PASSWORD}
    async with session.post(f"{base}/admin/login", data=form, allow_redirects=False) as signed:
        assert signed.status == 303 and signed.headers["Location"] == "/admin/"
    async with session.get(f"{base}/admin/", allow_redirects=False) as landing:
        assert landing.status == 303 and landing.headers["Location"] == f"/admin/ui/groups/{MINE}"
    async with session.get(f"{base}/admin/ui/groups/{MINE}") as page:
        html = await page.text()
        assert page.status == 200, html
    return hidden(html, "csrf")


def _form(template: str, csrf: str) -> dict[str, str]:
    form = {"csrf": csrf, "name": "from-the-table"}
    if template.endswith("/keys"):
        form["idempotency_key"] = secrets.token_urlsafe(12)
    if template.endswith("/rotate"):
        form["grace_minutes"] = "0"
    return form


def _body(method: str, template: str, *, inside: bool) -> dict[str, Any] | None:
    if method == "POST" and template == "/keys":
        return {"group": MINE if inside else THEIRS}
    return {"name": "from-the-table"} if method in ("POST", "PATCH") else None


async def _ui(
    session: aiohttp.ClientSession, base: str, method: str, path: str, csrf: str, template: str
) -> tuple[int, str, str]:
    data = _form(template, csrf) if method == "POST" else None
    async with session.request(method, base + path, data=data, allow_redirects=False) as reply:
        return reply.status, await reply.text(), reply.headers.get("Location", "")


async def test_every_route_of_the_table_inside_and_outside_the_group(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    world = await World(gateway).build()
    base = gateway.base_url
    routes = sorted(
        ((m, p) for m, p, _ in HANDLERS if (m, p) not in OPEN_ROUTES),
        key=lambda route: route == ("POST", "/logout"),  # the session's end comes last
    )
    assert len(routes) > 60
    seen: set[str | None] = set()
    async with browser_session() as session:
        csrf = await _dashboard(session, base)
        for method, template in routes:
            scope = GROUP_ADMIN_ROUTES[(method, template)]
            seen.add(scope)
            answers = {}
            for inside in (True, False):
                path = await world.path(template, inside=inside)
                if is_dashboard(path) or path == "/admin/":
                    status, text, location = await _ui(session, base, method, path, csrf, template)
                else:
                    status, reply = await as_gina(
                        gateway, method, path, _body(method, template, inside=inside)
                    )
                    text, location = str(reply), ""
                answers[inside] = (status, text, location)
            where = (method, template, scope, answers[True][0], answers[False][0])
            (status_in, text_in, location_in), (status_out, text_out, _) = answers.values()
            if scope is REFUSED:
                assert status_in == status_out == 403, where
                assert "group-admin" in text_in, where
                continue
            assert status_in < 500 and status_in not in (401, 403, 404), where
            for secret in world.secrets_of_theirs():
                assert secret not in text_in, (where, secret)
            if scope in (GROUP, KEY, REQUEST):
                assert status_out == 404, where
                assert world.theirs_key["prefix"] not in text_out, where
            elif scope == HOME:
                assert status_in == 303 and location_in == f"/admin/ui/groups/{MINE}", where
            elif method == "POST" and template == "/keys":
                assert status_out == 400 and "The groups are: acme." in text_out, where
    assert seen == {REFUSED, OWN, HOME, GROUP, KEY, REQUEST}


async def test_another_group_named_in_a_query_is_not_found(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await World(gateway).build()
    for path in (
        f"/admin/keys?group={THEIRS}",
        f"/admin/usage?group={THEIRS}",
        f"/admin/requests?group={THEIRS}",
        f"/admin/requests?group={THEIRS}&format=csv",
        f"/admin/groups/{THEIRS}",
    ):
        status, error = await as_gina(gateway, "GET", path)
        _, missing = await as_gina(gateway, "GET", path.replace(THEIRS, "no-such-group"))
        assert status == 404, (path, error)
        words = missing["error"]["message"].replace("no-such-group", THEIRS)
        assert error["error"]["message"] == words, path


async def test_lists_and_reports_hold_only_the_group(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    world = await World(gateway).build()
    _, groups = await as_gina(gateway, "GET", "/admin/groups")
    assert [g["name"] for g in groups["data"]] == [MINE]
    _, keys = await as_gina(gateway, "GET", "/admin/keys")
    assert keys["data"] and {k["group"] for k in keys["data"]} == {MINE}
    _, lines = await as_gina(gateway, "GET", "/admin/requests")
    assert lines["data"] and {line["group"] for line in lines["data"]} == {MINE}
    _, report = await as_gina(gateway, "GET", "/admin/usage?by=group")
    assert [row["group"] for row in report["data"]] == [MINE]
    status, csv = await as_gina(gateway, "GET", "/admin/requests?format=csv")
    assert status == 200 and world.mine_request in csv and world.theirs_request not in csv
    # what a key filter names of another group: nothing of it comes back
    other = world.theirs_key["id"]
    _, lines = await as_gina(gateway, "GET", f"/admin/requests?key={other}")
    assert lines["data"] == []


async def test_a_key_above_the_group_limits_is_refused_with_what_is_allowed(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    await World(gateway).build()
    for extra, param, words in (
        ({"rpm": 61}, "rpm", "requests per minute (61) may not be above its group's (60)"),
        ({"tpm": 50_001}, "tpm", "tokens per minute (50,001) may not be above"),
        ({"budget_usd": 25}, "budget_usd", "budget ($25.00) may not be above its group's ($20"),
        ({"models": ["vision-small"]}, "models", "only these models: chat-large; not vision"),
    ):
        status, error = await as_gina(gateway, "POST", "/admin/keys", {"group": MINE, **extra})
        assert status == 400, error
        assert error["error"]["param"] == param and error["error"]["code"] == "above_group_limit"
        assert words in error["error"]["message"], error
    status, key = await as_gina(
        gateway,
        "POST",
        "/admin/keys",
        {"group": MINE, "rpm": 60, "budget_usd": 5, "models": ["chat-large"]},
    )
    assert status == 201 and key["rpm"] == 60 and key["budget_usd"] == 5
    status, error = await as_gina(gateway, "PATCH", f"/admin/keys/{key['id']}", {"rpm": 100})
    assert status == 400 and error["error"]["code"] == "above_group_limit"
    status, changed = await as_gina(gateway, "PATCH", f"/admin/keys/{key['id']}", {"rpm": 30})
    assert status == 200 and changed["rpm"] == 30
    # an operator is not held to it by this rule (the group's limits apply to calls anyway)
    status, _ = await call(gateway, "POST", "/admin/keys", body={"group": MINE, "rpm": 100})
    assert status == 201


async def test_gina_works_her_keys_and_every_action_is_audited_as_hers(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    await World(gateway).build()
    status, key = await as_gina(gateway, "POST", "/admin/keys", {"group": MINE, "name": "ci"})
    assert status == 201
    status, rotated = await as_gina(gateway, "POST", f"/admin/keys/{key['id']}/rotate", {})
    assert status == 200 and rotated["key"] != key["key"]
    assert (await chat_status(gateway, rotated["key"]))[0] == 200
    status, revoked = await as_gina(gateway, "DELETE", f"/admin/keys/{key['id']}")
    assert status == 200 and revoked["status"] == "revoked"
    assert (await chat_status(gateway, rotated["key"]))[0] == 401
    _, audit = await call(gateway, "GET", "/admin/audit?actor=gina")
    assert {e["action"] for e in audit["data"]} >= {"key.create", "key.rotate", "key.revoke"}
    assert (await as_gina(gateway, "GET", "/admin/audit"))[0] == 403


async def test_owners_make_group_admins_and_the_group_is_checked(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await World(gateway).build()
    body = {"name": "nog", "role": "group-admin", "password": "a-long-password-1"}
    status, error = await call(gateway, "POST", "/admin/accounts", body=body)
    assert status == 400 and error["error"]["param"] == "group"
    status, error = await call(
        gateway, "POST", "/admin/accounts", body={**body, "group": "no-such-group"}
    )
    assert status == 400 and "no group named 'no-such-group'" in error["error"]["message"]
    status, error = await call(
        gateway, "POST", "/admin/accounts", body={**body, "role": "viewer", "group": MINE}
    )
    assert status == 400 and "Only a group-admin has a group" in error["error"]["message"]
    # moved to another group: at once
    status, moved = await call(gateway, "PATCH", f"/admin/accounts/{GINA}", body={"group": THEIRS})
    assert status == 200 and moved["group"] == THEIRS
    _, groups = await as_gina(gateway, "GET", "/admin/groups")
    assert [g["name"] for g in groups["data"]] == [THEIRS]
    # made a viewer: the group goes, the ladder's reads come
    status, viewer = await call(
        gateway, "PATCH", f"/admin/accounts/{GINA}", body={"role": "viewer"}
    )
    assert status == 200 and viewer["group"] is None and viewer["role"] == "viewer"
    _, groups = await as_gina(gateway, "GET", "/admin/groups")
    assert {g["name"] for g in groups["data"]} == {MINE, THEIRS}
    _, audit = await call(gateway, "GET", "/admin/audit?action=account.")
    assert any(e["detail"].get("group") == MINE for e in audit["data"])
    # a group-admin may not make accounts, nor can one be made through it
    status, _ = await call(
        gateway, "PATCH", f"/admin/accounts/{GINA}", body={"role": "group-admin"}
    )
    assert status == 400


async def test_the_owner_makes_a_group_admin_on_the_accounts_page(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    await World(gateway).build()
    base = gateway.base_url
    async with browser_session() as session:
        async with session.get(f"{base}/admin/login") as page:
            nonce = hidden(await page.text(), "nonce")
        await session.post(f"{base}/admin/login", data={"nonce": nonce, "token": ADMIN})
        async with session.get(f"{base}/admin/ui/accounts") as page:
            html = await page.text()
        assert "<option>group-admin</option>" in html and f"<option>{MINE}</option>" in html
        form = {
            "csrf": hidden(html, "csrf"),
            "name": "hugo",
            "role": "group-admin",
            "group": THEIRS,
            "password": "hugo-password-123",
        }
        async with session.post(f"{base}/admin/ui/accounts", data=form) as made:
            html = await made.text()
        assert made.status == 200 and 'data-account="hugo"' in html
    account = await gateway.services.store.get_account("hugo")
    assert account is not None and account.role == "group-admin"
    group = await gateway.services.store.get_group(THEIRS)
    assert group is not None and account.group_id == group.id


def test_the_cli_makes_a_group_admin_with_its_group(tmp_path: Path) -> None:
    config = tmp_path / "parley.yaml"
    config.write_text(f"database:\n  url: sqlite:///{tmp_path / 'parley.db'}\n")
    runner = CliRunner()

    def run(*args: str, stdin: str = "") -> tuple[int, str]:
        result = runner.invoke(cli, ["--config", str(config), *args], input=stdin)
        return result.exit_code, result.output

    assert run("groups", "create", MINE)[0] == 0
    made = ("admin", "create", "gina", "--role", "group-admin", "--password-stdin")
    code, out = run(*made, stdin=GINA_PASSWORD + "\n")
    assert code != 0 and "needs 'group'" in out
    code, out = run(*made, "--group", MINE, stdin=GINA_PASSWORD + "\n")
    assert code == 0 and "gina\tgroup-admin\tactive" in out, out
    code, out = run("admin", "set-role", "gina", "viewer", "--group", MINE)
    assert code != 0 and "Only a group-admin has a group" in out
    assert run("admin", "set-role", "gina", "viewer")[0] == 0


async def test_an_idempotency_key_of_another_group_tells_nothing_of_its_key(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    await World(gateway).build()
    once = {"Idempotency-Key": "release-1"}
    status, theirs = await call(
        gateway, "POST", "/admin/keys", body={"group": THEIRS}, headers=once
    )
    assert status == 201
    status, error = await call_as(
        gateway, "POST", "/admin/keys", None, json={"group": MINE}, headers={**basic(), **once}
    )
    assert status == 400 and error["error"]["param"] == "idempotency_key"
    assert theirs["prefix"] not in str(error) and str(theirs["id"]) not in str(error)
    mine = {"Idempotency-Key": "release-2"}
    status, made = await call_as(
        gateway, "POST", "/admin/keys", None, json={"group": MINE}, headers={**basic(), **mine}
    )
    assert status == 201
    status, again = await call_as(
        gateway, "POST", "/admin/keys", None, json={"group": MINE}, headers={**basic(), **mine}
    )
    assert status == 409 and made["prefix"] in again["error"]["message"]
