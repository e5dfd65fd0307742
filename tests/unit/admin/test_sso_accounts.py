"""Who a single sign-on is: the role its claim maps to, and the account it binds to (by
the provider's subject, never by a name another could take), on a real SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from parley.admin.oidc import OidcRefused
from parley.admin.sso import Audit, account_name, bind_account, mapped_role
from parley.domain.accounts import Account
from parley.runtime_settings import OidcSettings
from parley.settings import Settings
from parley.store.sql import SqlStore, open_store

ISSUER = "https://id.example.test"
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def settings(**overrides: Any) -> OidcSettings:
    fields: dict[str, Any] = {
        "issuer": ISSUER,
        "client_id": "parley",
        "redirect_base_url": "https://parley.example.test",
        "roles": {"admins": "owner", "ops": "operator", "staff": "viewer"},
        **overrides,
    }
    return OidcSettings.model_validate(fields)


def claims(name: str = "ada", sub: str = "user-1", groups: Any = ("staff",)) -> dict[str, Any]:
    return {"iss": ISSUER, "sub": sub, "preferred_username": name, "groups": list(groups)}


class Written:
    def __init__(self) -> None:
        self.entries: list[tuple[str, str, str, dict[str, Any]]] = []

    def __call__(self, who: str) -> Audit:
        async def audit(action: str, target: str, **detail: Any) -> None:
            self.entries.append((who, action, target, detail))

        return audit


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
    await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


def test_the_highest_mapped_role_wins_and_no_mapping_is_none() -> None:
    config = settings()
    assert mapped_role(claims(groups=["staff", "ops"]), config) == "operator"
    assert mapped_role(claims(groups=["admins", "staff"]), config) == "owner"
    assert mapped_role(claims(groups=["marketing"]), config) is None
    assert mapped_role({"sub": "x"}, config) is None
    assert mapped_role({"groups": "ops"}, config) == "operator"  # one value, not a list


def test_a_dotted_claim_reaches_into_objects() -> None:
    config = settings(role_claim="realm_access.roles", roles={"parley-admin": "owner"})
    assert mapped_role({"realm_access": {"roles": ["parley-admin"]}}, config) == "owner"
    assert mapped_role({"realm_access": ["parley-admin"]}, config) is None


def test_the_name_claim_becomes_an_account_name() -> None:
    config = settings()
    assert account_name(claims(name="Ada.Lovelace"), config) == "ada.lovelace"
    assert account_name({"email": "Ada@Example.test"}, settings(username_claim="email")) == (
        "ada-example.test"
    )
    assert account_name(claims(name="token"), config) is None  # the audit log's own actor
    assert account_name(claims(name="--"), config) is None
    assert account_name({"sub": "x"}, config) is None


async def test_the_first_sign_in_creates_the_account_where_allowed(store: SqlStore) -> None:
    written = Written()
    config = settings(create_accounts=True)
    account = await bind_account(store, config, claims(), "viewer", written)
    assert (account.name, account.role, account.sso_only) == ("ada", "viewer", True)
    assert account.sso_subject == f"{ISSUER} user-1"
    assert written.entries == [("ada", "account.create", "ada", {"role": "viewer", "via": "sso"})]
    again = await bind_account(store, config, claims(name="ada-renamed"), "operator", written)
    assert (again.name, again.role) == ("ada", "operator")  # found by subject; role follows
    assert written.entries[-1][1:3] == ("account.update", "ada")


async def test_without_creation_only_known_accounts_sign_in(store: SqlStore) -> None:
    with pytest.raises(OidcRefused, match="not created at the first sign-in"):
        await bind_account(store, settings(), claims(), "viewer", Written())
    assert await store.get_account("ada") is None


async def test_an_account_made_for_single_sign_on_is_bound_at_its_first(store: SqlStore) -> None:
    await store.add_account(Account("ada", "viewer", "", NOW, NOW))
    written = Written()
    account = await bind_account(store, settings(), claims(), "owner", written)
    assert (account.sso_subject, account.role) == (f"{ISSUER} user-1", "owner")
    assert [e[1] for e in written.entries] == ["account.bind", "account.update"]
    with pytest.raises(OidcRefused, match="not bound to this sign-in"):  # someone else's now
        await bind_account(store, settings(), claims(sub="user-2"), "owner", written)


async def test_an_account_with_a_password_is_never_taken_over(store: SqlStore) -> None:
    await store.add_account(Account("ada", "owner", "scrypt$x", NOW, NOW))
    with pytest.raises(OidcRefused, match="not bound to this sign-in"):
        await bind_account(store, settings(create_accounts=True), claims(), "owner", Written())
    kept = await store.get_account("ada")
    assert kept is not None and kept.sso_subject is None


async def test_a_disabled_account_is_refused(store: SqlStore) -> None:
    config = settings(create_accounts=True)
    await bind_account(store, config, claims(), "viewer", Written())
    await store.update_account("ada", {"disabled_at": NOW})
    with pytest.raises(OidcRefused, match="disabled"):
        await bind_account(store, config, claims(), "viewer", Written())


def test_the_settings_refuse_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="https"):
        settings(issuer="http://id.example.test")
    assert settings(issuer="http://127.0.0.1:8080").issuer == "http://127.0.0.1:8080"
    with pytest.raises(ValueError, match="openid"):
        settings(scopes=["profile"])
    with pytest.raises(ValueError, match="owner"):
        settings(roles={"admins": "superuser"})
    assert settings().redirect_uri == "https://parley.example.test/admin/sso/callback"
    assert "hunter2" not in repr(settings(client_secret="hunter2"))


def test_local_sign_in_off_needs_single_sign_on() -> None:
    with pytest.raises(ValueError, match="nobody could sign in"):
        Settings.model_validate({"admin": {"token": "t" * 32, "local_sign_in": False}})
    oidc = settings().model_dump(mode="json")
    on = {"admin": {"token": "t" * 32, "local_sign_in": False, "oidc": oidc}}
    assert Settings.model_validate(on).admin.local_sign_in is False
