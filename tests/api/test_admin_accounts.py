"""Named administrators: roles enforced on every admin route from one table, passwords
hashed, sign-in by name and password, failures audited and rate limited."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest

from parley.admin.roles import ROUTE_ROLES, needed
from parley.admin.site import HANDLERS
from parley.store.schema import admin_accounts
from tests.api.admin_client import ADMIN, browser_session, call, hidden
from tests.api.harness import Gateway
from tests.api.harness import call as call_as

PASSWORDS = {
    "olivia": "owner-password-123",
    "oscar": "operator-password-123",
    "vera": "viewer-password-123",
}
ROLES = {"olivia": "owner", "oscar": "operator", "vera": "viewer"}


def basic(name: str, password: str | None = None) -> dict[str, str]:
    secret = f"{name}:{password or PASSWORDS[name]}".encode()
    return {"Authorization": "Basic " + base64.b64encode(secret).decode()}


async def as_account(
    gateway: Gateway, name: str, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    return await call_as(gateway, method, path, None, json=body, headers=basic(name))


async def staffed(start_gateway: Any) -> Gateway:
    gateway: Gateway = await start_gateway(lambda c: c.update(admin={"token": ADMIN}))
    for name, role in ROLES.items():
        body = {"name": name, "role": role, "password": PASSWORDS[name]}
        status, created = await call(gateway, "POST", "/admin/accounts", body=body)
        assert status == 201, created
        assert created == {**created, "name": name, "role": role, "disabled": False}
        assert "password" not in str(created) and "hash" not in str(created)
    return gateway


def concrete(path: str) -> str:
    """A path template with made-up values for its parts."""
    return re.sub(r"\{[^}]+\}", "x1", path)


API_MUTATIONS = [
    (method, path)
    for method, path, target in HANDLERS
    if method != "GET" and ":" in target and not target.startswith("ui.")
]


def test_every_route_has_its_role_in_the_one_table() -> None:
    for method, path, _ in HANDLERS:
        if method != "GET" and path != "/login":
            assert (method, path) in ROUTE_ROLES, (method, path)
    assert needed("GET", "/groups") == "viewer"
    assert needed("POST", "/not-listed-yet") == "owner"
    assert needed("GET", "/accounts") == "owner"


async def test_a_viewer_is_refused_every_change_and_reads_everything(start_gateway: Any) -> None:
    gateway = await staffed(start_gateway)
    assert API_MUTATIONS
    for method, path in API_MUTATIONS:
        status, error = await as_account(gateway, "vera", method, "/admin" + concrete(path), {})
        assert status == 403, (method, path, status)
        assert error["error"]["code"] == "insufficient_role"
    for path in ("/admin/groups", "/admin/keys", "/admin/channels", "/admin/audit", "/admin/usage"):
        assert (await as_account(gateway, "vera", "GET", path))[0] == 200, path
    assert (await as_account(gateway, "vera", "GET", "/admin/accounts"))[0] == 403


async def test_an_operator_runs_tenants_but_not_administrators(start_gateway: Any) -> None:
    gateway = await staffed(start_gateway)
    status, _ = await as_account(gateway, "oscar", "POST", "/admin/groups", {"name": "acme"})
    assert status == 201
    status, _ = await as_account(gateway, "oscar", "POST", "/admin/keys", {"group": "acme"})
    assert status == 201
    for method, path in (
        ("GET", "/admin/accounts"),
        ("POST", "/admin/accounts"),
        ("PATCH", "/admin/accounts/vera"),
        ("DELETE", "/admin/accounts/vera"),
        ("POST", "/admin/channels/reseal"),
    ):
        assert (await as_account(gateway, "oscar", method, path, {}))[0] == 403, path
    _, audit = await call(gateway, "GET", "/admin/audit")
    actors = {(e["action"], e["actor"]) for e in audit["data"]}
    assert ("group.create", "oscar") in actors and ("key.create", "oscar") in actors
    assert ("account.create", "token") in actors


async def test_the_owner_manages_administrators_and_changes_apply_at_once(
    start_gateway: Any,
) -> None:
    gateway = await staffed(start_gateway)
    status, changed = await as_account(
        gateway, "olivia", "PATCH", "/admin/accounts/vera", {"role": "operator"}
    )
    assert status == 200 and changed["role"] == "operator"
    assert (await as_account(gateway, "vera", "POST", "/admin/groups", {"name": "g2"}))[0] == 201
    await as_account(gateway, "olivia", "PATCH", "/admin/accounts/vera", {"disabled": True})
    assert (await as_account(gateway, "vera", "GET", "/admin/groups"))[0] == 401
    await as_account(
        gateway,
        "olivia",
        "PATCH",
        "/admin/accounts/vera",
        {"disabled": False, "password": "a-brand-new-password"},
    )
    assert (await as_account(gateway, "vera", "GET", "/admin/groups"))[0] == 401
    headers = basic("vera", "a-brand-new-password")
    assert (await call_as(gateway, "GET", "/admin/groups", None, headers=headers))[0] == 200
    status, _ = await as_account(gateway, "olivia", "DELETE", "/admin/accounts/vera")
    assert status == 200
    _, listed = await as_account(gateway, "olivia", "GET", "/admin/accounts")
    assert [a["name"] for a in listed["data"]] == ["olivia", "oscar"]
    bad = [
        ({"name": "Bad Name", "role": "viewer", "password": "long-enough-pass"}, "name"),
        ({"name": "token", "role": "viewer", "password": "long-enough-pass"}, "name"),
        ({"name": "ok", "role": "king", "password": "long-enough-pass"}, "role"),
        ({"name": "ok", "role": "viewer", "password": "short"}, "password"),
        ({"name": "oscar", "role": "viewer", "password": "long-enough-pass"}, "name"),
    ]
    for body, param in bad:
        status, error = await call(gateway, "POST", "/admin/accounts", body=body)
        assert status == 400 and error["error"]["param"] == param, body


@pytest.mark.owasp_scrypt
async def test_passwords_are_stored_as_scrypt_hashes(start_gateway: Any) -> None:
    gateway = await staffed(start_gateway)

    def hashes(conn: Any) -> list[str]:
        return [row.password_hash for row in conn.execute(admin_accounts.select())]

    stored = await gateway.services.store.database.read(hashes)  # type: ignore[attr-defined]
    assert len(stored) == 3 and len(set(stored)) == 3
    for value in stored:
        assert value.startswith("scrypt$17$8$1$")
        assert not any(password in value for password in PASSWORDS.values())


async def dashboard_login(gateway: Gateway, session: Any, account: str, password: str) -> int:
    base = gateway.base_url
    async with session.get(f"{base}/admin/login") as page:
        nonce = hidden(await page.text(), "nonce")
    form = {"nonce": nonce, "account": account, "token": password}
    async with session.post(f"{base}/admin/login", data=form, allow_redirects=False) as reply:
        await reply.read()
        return reply.status


async def test_dashboard_sign_in_by_name_names_the_account_and_failures_are_audited(
    start_gateway: Any,
) -> None:
    gateway = await staffed(start_gateway)
    base = gateway.base_url
    async with browser_session() as session:
        assert await dashboard_login(gateway, session, "vera", "not-her-password") == 401
        assert await dashboard_login(gateway, session, "vera", PASSWORDS["vera"]) == 303
        async with session.get(f"{base}/admin/ui/groups") as page:
            html = await page.text()
        assert "vera · viewer" in html and "Create group" not in html
        csrf = hidden(html, "csrf")
        async with session.post(
            f"{base}/admin/ui/groups", data={"csrf": csrf, "name": "sneaky"}
        ) as refused:
            assert refused.status == 403
        async with session.get(f"{base}/admin/ui/accounts") as page:
            assert page.status == 403
    async with browser_session() as session:
        assert await dashboard_login(gateway, session, "oscar", PASSWORDS["oscar"]) == 303
        async with session.get(f"{base}/admin/ui/groups") as page:
            html = await page.text()
        assert "Create group" in html and "Administrators" not in html
        csrf = hidden(html, "csrf")
        async with session.post(
            f"{base}/admin/ui/groups",
            data={"csrf": csrf, "name": "made-by-oscar"},
            allow_redirects=False,
        ) as made:
            assert made.status == 303
    _, audit = await call(gateway, "GET", "/admin/audit")
    entries = [(e["action"], e["actor"], e["target"]) for e in audit["data"]]
    assert ("session.login_failed", "vera", "dashboard") in entries
    assert ("session.login", "vera", "dashboard") in entries
    assert ("group.create", "oscar", "made-by-oscar") in entries
    assert "not-her-password" not in str(audit)


async def test_failed_sign_ins_are_rate_limited(start_gateway: Any) -> None:
    gateway = await staffed(start_gateway)
    statuses = []
    for attempt in range(7):
        headers = basic("olivia", f"guess-number-{attempt}")
        statuses.append((await call_as(gateway, "GET", "/admin/groups", None, headers=headers))[0])
    assert statuses[:5] == [401] * 5 and statuses[5:] == [429, 429]
    # her right password, and the admin token, are never refused by the lock-out
    assert (await call_as(gateway, "GET", "/admin/groups", None, headers=basic("olivia")))[0] == 200
    assert (await call_as(gateway, "GET", "/admin/groups", ADMIN))[0] == 200
    audit = await gateway.services.store.list_audit()
    failed = [e for e in audit if e.action == "session.login_failed"]
    assert len(failed) == 5 and {(e.actor, e.target) for e in failed} == {("olivia", "api")}
    locked = {(e.actor, e.target) for e in audit if e.action == "session.locked_out"}
    assert locked == {("olivia", "127.0.0.1"), ("olivia", "account:olivia")}
    assert not any("guess-number" in str(e) for e in audit)


async def test_a_viewer_is_refused_every_dashboard_action(start_gateway: Any) -> None:
    gateway = await staffed(start_gateway)
    base = gateway.base_url
    actions = [
        path for method, path, target in HANDLERS if method == "POST" and target.startswith("ui.")
    ]
    assert len(actions) >= 15
    async with browser_session() as session:
        assert await dashboard_login(gateway, session, "vera", PASSWORDS["vera"]) == 303
        async with session.get(f"{base}/admin/ui/groups") as page:
            csrf = hidden(await page.text(), "csrf")
        for path in actions:
            if path in ("/logout", "/login"):
                continue
            async with session.post(
                f"{base}/admin{concrete(path)}", data={"csrf": csrf}, allow_redirects=False
            ) as reply:
                assert reply.status == 403, path
                wanted = "owner" if path.startswith("/ui/accounts") else "operator"
                assert f"needs the {wanted} role" in await reply.text(), path


async def test_an_account_for_single_sign_on_has_no_password(start_gateway: Any) -> None:
    gateway = await staffed(start_gateway)
    body = {"name": "ada", "role": "viewer", "sso": True}
    status, created = await call(gateway, "POST", "/admin/accounts", body=body)
    assert status == 201 and created["sso"] is True
    stored = await gateway.services.store.get_account("ada")
    assert stored is not None and stored.sso_only and stored.sso_subject is None
    guess = basic("ada", "anything-at-all-123")  # no password signs it in
    status, _ = await call_as(gateway, "GET", "/admin/groups", None, headers=guess)
    assert status == 401
    with_password = {**body, "name": "bo", "password": "a-password-123"}
    status, refused = await call(gateway, "POST", "/admin/accounts", body=with_password)
    assert status == 400 and refused["error"]["param"] == "password"
    status, refused = await call(gateway, "POST", "/admin/accounts", body={**body, "sso": "yes"})
    assert status == 400 and refused["error"]["param"] == "sso"
    status, listed = await call(gateway, "GET", "/admin/accounts")
    assert {a["name"]: a["sso"] for a in listed["data"]}["olivia"] is False
