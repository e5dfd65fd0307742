"""Administrator accounts: the service the API, the dashboard and the CLI share, and
the JSON API's handlers (``/admin/accounts``, the owner's alone: ``roles.py``).

A password is hashed (``passwords.py``) before it reaches the store and never leaves
it; every change is audited under the acting administrator, without the password.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from parley.admin.context import ADMIN_STATE, admin_service
from parley.admin.passwords import Hasher
from parley.admin.service import AdminService
from parley.api.body import read_json
from parley.api.reply import json_reply
from parley.domain.accounts import (
    ACCOUNT_NAME,
    ACCOUNT_NAME_RULE,
    MAX_PASSWORD,
    MIN_PASSWORD,
    ROLES,
    Account,
    Role,
)
from parley.errors import InvalidRequest, NotFound
from parley.store.base import Conflict, Missing

RESERVED = frozenset({"token", "cli", "breaker", "sso"})
"""Names the audit log uses for other actors."""


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not ACCOUNT_NAME.fullmatch(name) or name in RESERVED:
        raise InvalidRequest(
            f"An account name is {ACCOUNT_NAME_RULE}, and not one of "
            f"{', '.join(sorted(RESERVED))}.",
            param="name",
        )
    return name


def check_role(role: Any) -> Role:
    if role not in ROLES:
        raise InvalidRequest(f"'role' must be one of {', '.join(ROLES)}.", param="role")
    found: Role = role
    return found


def check_password(password: Any) -> str:
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidRequest(
            f"A password is {MIN_PASSWORD} to {MAX_PASSWORD} characters long.", param="password"
        )
    return password


def account_view(account: Account) -> dict[str, Any]:
    """An account as shown (never its password hash)."""
    return {
        "object": "admin.account",
        "name": account.name,
        "role": account.role,
        "disabled": account.disabled_at is not None,
        "disabled_at": _iso(account.disabled_at),
        "sso": account.sso_only or account.sso_subject is not None,
        "created_at": _iso(account.created_at),
        "updated_at": _iso(account.updated_at),
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class Accounts:
    def __init__(self, admin: AdminService, hasher: Hasher) -> None:
        self._admin = admin
        self._store = admin.store
        self._hasher = hasher

    async def list(self) -> list[Account]:
        return await self._store.list_accounts()

    async def create(self, name: Any, role: Any, password: Any, *, sso: bool = False) -> Account:
        """An account signed in by its password, or with ``sso`` one with none, for the
        single sign-on whose name claim is ``name`` (bound at its first sign-in)."""
        name, role = check_name(name), check_role(role)
        if sso and password is not None:
            raise InvalidRequest("An account for single sign-on has no password.", param="password")
        now = datetime.now(UTC)
        hashed = "" if sso else await self._hasher.hash(check_password(password))
        try:
            account = await self._store.add_account(Account(name, role, hashed, now, now))
        except Conflict:
            raise InvalidRequest(
                f"An account named '{name}' already exists.", param="name", code="conflict"
            ) from None
        await self._admin.audit("account.create", name, role=role, **({"sso": True} if sso else {}))
        return account

    async def update(
        self,
        name: str,
        *,
        role: Any = None,
        password: Any = None,
        disabled: bool | None = None,
    ) -> Account:
        changes: dict[str, Any] = {}
        if role is not None:
            changes["role"] = check_role(role)
        if password is not None:
            changes["password_hash"] = await self._hasher.hash(check_password(password))
        if disabled is not None:
            changes["disabled_at"] = datetime.now(UTC) if disabled else None
        try:
            account = await self._store.update_account(name, changes)
        except Missing:
            raise NotFound(f"No account named '{name}'.", param="name") from None
        detail: dict[str, Any] = {"role": account.role, "disabled": disabled}
        if password is not None:
            detail["password"] = "changed"
        await self._admin.audit("account.update", name, **detail)
        return account

    async def delete(self, name: str) -> None:
        if not await self._store.delete_account(name):
            raise NotFound(f"No account named '{name}'.", param="name")
        await self._admin.audit("account.delete", name)


def accounts_of(request: web.Request) -> Accounts:
    return Accounts(admin_service(request), request.config_dict[ADMIN_STATE].hasher)


async def list_accounts(request: web.Request) -> web.Response:
    found = await accounts_of(request).list()
    return json_reply({"object": "list", "data": [account_view(a) for a in found]})


async def create_account(request: web.Request) -> web.Response:
    body = await read_json(request)
    sso = body.get("sso", False)
    if not isinstance(sso, bool):
        raise InvalidRequest("'sso' must be true or false.", param="sso")
    account = await accounts_of(request).create(
        body.get("name"), body.get("role"), body.get("password"), sso=sso
    )
    return json_reply(account_view(account), status=201)


async def update_account(request: web.Request) -> web.Response:
    body = await read_json(request)
    disabled = body.get("disabled")
    if disabled is not None and not isinstance(disabled, bool):
        raise InvalidRequest("'disabled' must be true or false.", param="disabled")
    account = await accounts_of(request).update(
        request.match_info["name"],
        role=body.get("role"),
        password=body.get("password"),
        disabled=disabled,
    )
    return json_reply(account_view(account))


async def delete_account(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await accounts_of(request).delete(name)
    return json_reply({"object": "admin.account", "name": name, "deleted": True})
