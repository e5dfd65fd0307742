"""The dashboard pages that change things: groups, one group, keys.

Each form posts here; a change goes through ``AdminService`` (audited, applied to the
directory at once) and then redirects to the page that shows it, except key creation,
which renders the new key once in its reply and nowhere else.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web
from multidict import MultiDictProxy

from parley.admin.context import admin_service
from parley.admin.service import GROUP_NAME_RULE
from parley.admin.ui.render import page
from parley.domain.groups import Group, Quota
from parley.domain.pricing import usd_to_nanos
from parley.errors import InvalidRequest, NotFound
from parley.pipeline.context import SERVICES
from parley.store.base import GroupChanges

Form = MultiDictProxy[Any]
ALL_MODELS = "*"


def group_url(name: str) -> str:
    return f"/admin/ui/groups/{quote(name, safe='')}"


def _text(form: Form, name: str) -> str:
    value = form.get(name, "")
    return value.strip() if isinstance(value, str) else ""


def _limit(form: Form, name: str, label: str) -> int | None:
    raw = _text(form, name)
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise InvalidRequest(f"{label} must be a whole number above zero, or empty.", param=name)
    return int(raw)


def _budget(form: Form) -> int | None:
    raw = _text(form, "budget_usd").removeprefix("$")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise InvalidRequest("The budget must be an amount in USD (0 or more), or empty.")
    return usd_to_nanos(raw)


def _models(form: Form) -> frozenset[str] | None:
    chosen = [value for value in form.getall("models", []) if isinstance(value, str)]
    if ALL_MODELS in chosen:
        return None
    return frozenset(chosen)


def _context(request: web.Request) -> dict[str, Any]:
    svc = request.config_dict[SERVICES]
    return {
        "models": [model.name for model in svc.settings.models],
        "name_rule": GROUP_NAME_RULE,
        "period": svc.meter.ledger.period,
    }


async def groups_page(request: web.Request) -> web.Response:
    service = admin_service(request)
    groups = await service.groups()
    keys = await service.keys()
    active: dict[int, int] = {}
    for state in keys:
        if state.status == "active":
            active[state.record.group_id] = active.get(state.record.group_id, 0) + 1
    budgets = {group.id: await service.budget(group) for group in groups}
    return page(
        request,
        "groups.html",
        {"groups": groups, "active": active, "budgets": budgets, **_context(request)},
    )


async def create_group(request: web.Request) -> web.Response:
    form = await request.post()
    group = await admin_service(request).create_group(
        _text(form, "name"),
        quota=Quota(
            rpm=_limit(form, "rpm", "Requests per minute"),
            tpm=_limit(form, "tpm", "Tokens per minute"),
        ),
        models=_models(form),
        budget_nanos=_budget(form),
    )
    raise web.HTTPSeeOther(group_url(group.name))


async def group_page(request: web.Request) -> web.Response:
    service = admin_service(request)
    group = await service.group(request.match_info["name"])
    return await _group_page(request, group, new_key=None)


async def _group_page(
    request: web.Request, group: Group, *, new_key: dict[str, Any] | None
) -> web.Response:
    service = admin_service(request)
    return page(
        request,
        "group.html",
        {
            "group": group,
            "budget": await service.budget(group),
            "keys": await service.keys(group.name),
            "new_key": new_key,
            **_context(request),
        },
    )


async def update_group(request: web.Request) -> web.Response:
    form = await request.post()
    rpm, tpm = _limit(form, "rpm", "Requests per minute"), _limit(form, "tpm", "Tokens per minute")
    budget, models = _budget(form), _models(form)
    changes = GroupChanges(
        rpm=rpm,
        tpm=tpm,
        budget_nanos=budget,
        models=models,
        clear_rpm=rpm is None,
        clear_tpm=tpm is None,
        clear_budget=budget is None,
        clear_models=models is None,
    )
    group = await admin_service(request).update_group(request.match_info["name"], changes)
    raise web.HTTPSeeOther(group_url(group.name))


async def disable_group(request: web.Request) -> web.Response:
    group = await admin_service(request).set_disabled(request.match_info["name"], True)
    raise web.HTTPSeeOther(group_url(group.name))


async def enable_group(request: web.Request) -> web.Response:
    group = await admin_service(request).set_disabled(request.match_info["name"], False)
    raise web.HTTPSeeOther(group_url(group.name))


async def create_key(request: web.Request) -> web.Response:
    form = await request.post()
    service = admin_service(request)
    group = await service.group(request.match_info["name"])
    state, secret = await service.create_key(
        group.name,
        name=_text(form, "name"),
        expires_in_days=_limit(form, "expires_in_days", "Days until it expires"),
        quota=Quota(
            rpm=_limit(form, "rpm", "Requests per minute"),
            tpm=_limit(form, "tpm", "Tokens per minute"),
        ),
    )
    return await _group_page(request, group, new_key={"state": state, "secret": secret})


async def revoke_key(request: web.Request) -> web.Response:
    raw = request.match_info["key_id"]
    if not raw.isdigit():
        raise NotFound(f"No key with id '{raw}'.")
    service = admin_service(request)
    state = await service.revoke_key(int(raw))
    names = {group.id: group.name for group in await service.groups()}
    raise web.HTTPSeeOther(group_url(names[state.record.group_id]))
