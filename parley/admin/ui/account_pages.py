"""The dashboard's administrators page (the owner's alone, ``roles.py``): the accounts,
a form to add one, and per account its role (a group-admin's group too), a new password,
disable/enable, delete.
Changes go through ``accounts.Accounts`` (hashed, audited)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from parley.admin.accounts import accounts_of
from parley.admin.ui.render import page
from parley.domain.accounts import ACCOUNT_NAME_RULE, ACCOUNT_ROLES, GROUP_ADMIN, MIN_PASSWORD
from parley.errors import ParleyError

ACCOUNTS = "/admin/ui/accounts"


def _group(form: Any) -> Any:
    """The form's group, for a group-admin only (a select left set for another role is
    not a mistake to refuse)."""
    return (form.get("group") or None) if form.get("role") == GROUP_ADMIN else None


async def accounts_page(
    request: web.Request, *, error: str = "", values: Any = None, status: int = 200
) -> web.Response:
    accounts = accounts_of(request)
    names = await accounts.group_names()
    context = {
        "accounts": await accounts.list(),
        "roles": ACCOUNT_ROLES,
        "group_names": names,
        "groups": sorted(names.values()),
        "name_rule": ACCOUNT_NAME_RULE,
        "min_password": MIN_PASSWORD,
        "error": error,
        "values": values or {},
    }
    return page(request, "accounts.html", context, status=status)


async def create_account(request: web.Request) -> web.Response:
    form = await request.post()
    try:
        await accounts_of(request).create(
            str(form.get("name", "")).strip(),
            form.get("role"),
            form.get("password"),
            _group(form),
        )
    except ParleyError as problem:
        kept = {
            "name": form.get("name", ""),
            "role": form.get("role", "viewer"),
            "group": form.get("group", ""),
        }
        return await accounts_page(
            request, error=problem.message, values=kept, status=problem.status
        )
    raise web.HTTPSeeOther(ACCOUNTS)


async def update_account(request: web.Request) -> web.Response:
    form = await request.post()
    password = form.get("password") or None
    disabled = {"disable": True, "enable": False}.get(str(form.get("action", "")))
    try:
        await accounts_of(request).update(
            request.match_info["name"],
            role=form.get("role") or None,
            password=password,
            disabled=disabled,
            group=_group(form),
        )
    except ParleyError as problem:
        return await accounts_page(request, error=problem.message, status=problem.status)
    raise web.HTTPSeeOther(ACCOUNTS)


async def delete_account(request: web.Request) -> web.Response:
    await accounts_of(request).delete(request.match_info["name"])
    raise web.HTTPSeeOther(ACCOUNTS)
