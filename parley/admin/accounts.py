"""Administrator accounts: the service the API, the dashboard and the CLI share, and
the JSON API's handlers (``/admin/accounts``, the owner's alone: ``roles.py``).

A ``group-admin`` names the one group it administers (``group``, by name; stored as its
id): required for that role, refused for the others, cleared when the role changes.

A password is hashed (``passwords.py``) before it reaches the store and never leaves
it; every change is audited under the acting administrator, without the password.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    ACCOUNT_ROLES,
    GROUP_ADMIN,
    MAX_PASSWORD,
    MIN_PASSWORD,
    Account,
    AccountRole,
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


def check_role(role: Any) -> AccountRole:
    if role not in ACCOUNT_ROLES:
        raise InvalidRequest(f"'role' must be one of {', '.join(ACCOUNT_ROLES)}.", param="role")
    found: AccountRole = role
    return found


def check_password(password: Any) -> str:
    if not isinstance(password, str) or not MIN_PASSWORD <= len(password) <= MAX_PASSWORD:
        raise InvalidRequest(
            f"A password is {MIN_PASSWORD} to {MAX_PASSWORD} characters long.", param="password"
        )
    return password


def account_view(account: Account, groups: Mapping[int, str] | None = None) -> dict[str, Any]:
    """An account as shown (never its password hash), with a group-admin's group name."""
    group = account.group_id
    return {
        "object": "admin.account",
        "name": account.name,
        "role": account.role,
        "group": (groups or {}).get(group) if group is not None else None,
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

    async def group_names(self) -> dict[int, str]:
        return {group.id: group.name for group in await self._store.list_groups()}

    async def _group_id(self, role: AccountRole, group: Any) -> int | None:
        """The id of a group-admin's group (named by ``group``); None for other roles."""
        named = group not in (None, "")
        if role != GROUP_ADMIN:
            if named:
                raise InvalidRequest(
                    "Only a group-admin has a group; leave 'group' out for this role.",
                    param="group",
                )
            return None
        found = (
            await self._store.get_group(group)
            if isinstance(group, str) and len(group) <= 200 and group.isprintable()
            else None
        )
        if found is None:
            raise InvalidRequest(
                "A group-admin needs 'group': the name of an existing group."
                + (f" There is no group named '{group}'." if named else ""),
                param="group",
            )
        return found.id

    async def create(
        self, name: Any, role: Any, password: Any, group: Any = None, *, sso: bool = False
    ) -> Account:
        """An account signed in by its password, or with ``sso`` one with none, for the
        single sign-on whose name claim is ``name`` (bound at its first sign-in); a
        group-admin's names its ``group``."""
        name, role = check_name(name), check_role(role)
        if sso and password is not None:
            raise InvalidRequest("An account for single sign-on has no password.", param="password")
        group_id = await self._group_id(role, group)
        now = datetime.now(UTC)
        hashed = "" if sso else await self._hasher.hash(check_password(password))
        account = Account(name, role, hashed, now, now, group_id=group_id)
        try:
            account = await self._store.add_account(account)
        except Conflict:
            raise InvalidRequest(
                f"An account named '{name}' already exists.", param="name", code="conflict"
            ) from None
        noted: dict[str, Any] = {"sso": True} if sso else {}
        if group_id is not None:
            noted["group"] = group
        await self._admin.audit("account.create", name, role=role, **noted)
        return account

    async def update(
        self,
        name: str,
        *,
        role: Any = None,
        password: Any = None,
        disabled: bool | None = None,
        group: Any = None,
    ) -> Account:
        changes: dict[str, Any] = {}
        current = await self._store.get_account(name) if ACCOUNT_NAME.fullmatch(name) else None
        if current is None:
            raise NotFound(f"No account named '{name}'.", param="name")
        if role is not None:
            changes["role"] = check_role(role)
        new_role: AccountRole = changes.get("role", current.role)
        had_group = current.group_id is not None
        if group not in (None, "") or (new_role == GROUP_ADMIN) != had_group:
            # a group named, a group-admin made (it needs one) or unmade (it loses it);
            # a group-admin left without a group named keeps its own
            changes["group_id"] = await self._group_id(new_role, group)
        if password is not None:
            changes["password_hash"] = await self._hasher.hash(check_password(password))
        if disabled is not None:
            changes["disabled_at"] = datetime.now(UTC) if disabled else None
        try:
            account = await self._store.update_account(name, changes)
        except Missing:
            raise NotFound(f"No account named '{name}'.", param="name") from None
        detail: dict[str, Any] = {"role": account.role, "disabled": disabled}
        if "group_id" in changes:
            detail["group"] = (await self.group_names()).get(account.group_id or 0)
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
    accounts = accounts_of(request)
    found, names = await accounts.list(), await accounts.group_names()
    return json_reply({"object": "list", "data": [account_view(a, names) for a in found]})


async def create_account(request: web.Request) -> web.Response:
    body = await read_json(request)
    sso = body.get("sso", False)
    if not isinstance(sso, bool):
        raise InvalidRequest("'sso' must be true or false.", param="sso")
    accounts = accounts_of(request)
    account = await accounts.create(
        body.get("name"), body.get("role"), body.get("password"), body.get("group"), sso=sso
    )
    return json_reply(account_view(account, await accounts.group_names()), status=201)


async def update_account(request: web.Request) -> web.Response:
    body = await read_json(request)
    disabled = body.get("disabled")
    if disabled is not None and not isinstance(disabled, bool):
        raise InvalidRequest("'disabled' must be true or false.", param="disabled")
    accounts = accounts_of(request)
    account = await accounts.update(
        request.match_info["name"],
        role=body.get("role"),
        password=body.get("password"),
        disabled=disabled,
        group=body.get("group"),
    )
    return json_reply(account_view(account, await accounts.group_names()))


async def delete_account(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await accounts_of(request).delete(name)
    return json_reply({"object": "admin.account", "name": name, "deleted": True})
