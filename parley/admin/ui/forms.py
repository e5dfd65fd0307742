"""The dashboard pages that change things: groups, one group, keys.

Each form posts here; a change goes through ``AdminService`` (audited, applied to the
directory at once) and then redirects to the page that shows it. A form that fails is
shown again with what was typed and the error beside its field (``ui/fields.py``). Key
creation renders the new key once in its reply and nowhere else; its form carries an
idempotency key, so sending it again (a reload) creates nothing and says so.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web
from multidict import MultiDictProxy

from parley.admin.context import admin_service
from parley.admin.fields import (
    MAX_LIMIT,
    check_sealable,
    content_policy_field,
    retention_field,
)
from parley.admin.finding import DEFAULT_PAGE, GROUPS, listing_from_params
from parley.admin.service import GROUP_NAME_RULE, KeyReplayed
from parley.admin.ui.fields import FormState
from parley.admin.ui.render import page
from parley.domain.content import CONTENT_POLICIES
from parley.domain.groups import Group, Quota
from parley.domain.numbers import whole_number
from parley.domain.pricing import usd_to_nanos
from parley.errors import InvalidRequest, NotFound
from parley.pipeline.context import SERVICES
from parley.store.base import GroupChanges

Form = MultiDictProxy[Any]
ALL_MODELS = "*"
MAX_FORM_TOKEN = 64


def group_url(name: str) -> str:
    return f"/admin/ui/groups/{quote(name, safe='')}"


def limits_values(
    rpm: int | None, tpm: int | None, budget: int | None, models: Any
) -> dict[str, Any]:
    """A form's fields for rates, a budget and models, as they are now."""
    return {
        "rpm": str(rpm) if rpm else "",
        "tpm": str(tpm) if tpm else "",
        "budget_usd": f"{budget / 1e9:.9f}".rstrip("0").rstrip(".") if budget is not None else "",
        "models": [ALL_MODELS] if models is None else sorted(models),
    }


def _text(form: Form, name: str) -> str:
    value = form.get(name, "")
    return value.strip() if isinstance(value, str) else ""


def _limit(form: Form, name: str, label: str) -> int | None:
    raw = _text(form, name)
    if not raw:
        return None
    number = whole_number(raw, 1, MAX_LIMIT)
    if number is None:
        raise InvalidRequest(
            f"{label} must be a whole number from 1 to {MAX_LIMIT:,}, or empty.", param=name
        )
    return number


def _budget(form: Form) -> int | None:
    raw = _text(form, "budget_usd").removeprefix("$")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise InvalidRequest(
            "The budget must be an amount in USD (0 or more), or empty.", param="budget_usd"
        )
    return usd_to_nanos(raw)


def _models(form: Form) -> frozenset[str] | None:
    chosen = [value for value in form.getall("models", []) if isinstance(value, str)]
    if ALL_MODELS in chosen:
        return None
    return frozenset(chosen)


def _context(request: web.Request) -> dict[str, Any]:
    svc = request.config_dict[SERVICES]
    return {
        "models": svc.model_names(),
        "name_rule": GROUP_NAME_RULE,
        "name_pattern": r"[A-Za-z0-9][A-Za-z0-9._\-]{0,63}",
        "period": svc.meter.ledger.period,
    }


async def groups_page(
    request: web.Request, new_group: FormState | None = None, status: int = 200
) -> web.Response:
    """One page of groups (searched and sorted as the query says) and the new-group form."""
    service = admin_service(request)
    listing = listing_from_params(request.query, GROUPS.sort_names(), default_limit=DEFAULT_PAGE)
    if not request.query.get("sort"):
        listing = replace(listing, sort="name")
    found = GROUPS.find(await service.groups(), listing)
    active: dict[int, int] = {}
    for state in await service.keys():
        if state.status == "active":
            active[state.record.group_id] = active.get(state.record.group_id, 0) + 1
    budgets = {group.id: await service.budget(group) for group in found.items}
    sort_value = ("-" if listing.descending else "") + listing.sort

    def page_url(**change: Any) -> str:
        query = {"q": listing.q, "sort": sort_value, "offset": listing.offset, **change}
        kept = {name: value for name, value in query.items() if value not in ("", 0, None)}
        return "/admin/ui/groups" + (f"?{urlencode(kept)}" if kept else "")

    context = {
        "found": found,
        "listing": listing,
        "sort_value": sort_value,
        "page_url": page_url,
        "active": active,
        "budgets": budgets,
        "new_group": new_group
        or FormState.fresh("new-group", limits_values(None, None, None, None)),
        **_context(request),
    }
    return page(request, "groups.html", context, status=status)


async def create_group(request: web.Request) -> web.Response:
    form = await request.post()
    try:
        group = await admin_service(request).create_group(
            _text(form, "name"),
            quota=Quota(
                rpm=_limit(form, "rpm", "Requests per minute"),
                tpm=_limit(form, "tpm", "Tokens per minute"),
            ),
            models=_models(form),
            budget_nanos=_budget(form),
        )
    except InvalidRequest as error:
        return await groups_page(request, FormState.failed("new-group", form, error), 400)
    raise web.HTTPSeeOther(group_url(group.name))


async def group_page(request: web.Request) -> web.Response:
    service = admin_service(request)
    group = await service.group(request.match_info["name"])
    return await _group_page(request, group)


def content_values(group: Group) -> dict[str, Any]:
    """The content form's fields, as the group's policy is now."""
    return {
        "content_policy": group.content.policy,
        "content_retention_days": str(group.content.retention_days),
    }


async def update_content(request: web.Request) -> web.Response:
    """The group's content policy and retention (``docs/operations.md``, Content logging)."""
    form = await request.post()
    service = admin_service(request)
    name = request.match_info["name"]
    try:
        days = _limit(form, "content_retention_days", "The retention")
        body = {"content_policy": _text(form, "content_policy"), "content_retention_days": days}
        policy = content_policy_field(body)
        check_sealable(policy, request.config_dict[SERVICES].contents.can_seal)
        changes = GroupChanges(content_policy=policy, content_retention_days=retention_field(body))
    except InvalidRequest as error:
        group = await service.group(name)
        failed = FormState.failed("content", form, error)
        return await _group_page(request, group, content_form=failed, status=400)
    group = await service.update_group(name, changes)
    raise web.HTTPSeeOther(group_url(group.name))


def group_values(group: Group) -> dict[str, Any]:
    return limits_values(group.quota.rpm, group.quota.tpm, group.budget_nanos, group.models)


def new_key_form() -> FormState:
    """An empty key form with a fresh idempotency key (one key per form sent)."""
    values = {"idempotency_key": secrets.token_urlsafe(18), "models": [ALL_MODELS]}
    return FormState.fresh("new-key", values)


async def _group_page(
    request: web.Request,
    group: Group,
    *,
    new_key: dict[str, Any] | None = None,
    key_form: FormState | None = None,
    group_form: FormState | None = None,
    status: int = 200,
    content_form: FormState | None = None,
) -> web.Response:
    service = admin_service(request)
    replayed = request.query.get("replayed", "")
    keys = await service.keys(group.name)
    return page(
        request,
        "group.html",
        {
            "group": group,
            "budget": await service.budget(group),
            "keys": keys,
            "key_budgets": {
                state.record.id: await service.key_budget(state.record) for state in keys
            },
            "new_key": new_key,
            "replayed": replayed if replayed.isdecimal() else "",
            "key_form": key_form or new_key_form(),
            "group_form": group_form or FormState.fresh("group", group_values(group)),
            "content_form": content_form or FormState.fresh("content", content_values(group)),
            "content_policies": CONTENT_POLICIES,
            "key_models": sorted(group.models)
            if group.models is not None
            else _context(request)["models"],
            **_context(request),
        },
        status=status,
    )


async def update_group(request: web.Request) -> web.Response:
    form = await request.post()
    service = admin_service(request)
    try:
        rpm = _limit(form, "rpm", "Requests per minute")
        tpm = _limit(form, "tpm", "Tokens per minute")
        budget, models = _budget(form), _models(form)
    except InvalidRequest as error:
        group = await service.group(request.match_info["name"])
        failed = FormState.failed("group", form, error)
        return await _group_page(request, group, group_form=failed, status=400)
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
    group = await service.update_group(request.match_info["name"], changes)
    raise web.HTTPSeeOther(group_url(group.name))


async def disable_group(request: web.Request) -> web.Response:
    group = await admin_service(request).set_disabled(request.match_info["name"], True)
    raise web.HTTPSeeOther(group_url(group.name))


async def enable_group(request: web.Request) -> web.Response:
    group = await admin_service(request).set_disabled(request.match_info["name"], False)
    raise web.HTTPSeeOther(group_url(group.name))


def _idempotency_key(form: Form) -> str | None:
    value = _text(form, "idempotency_key")
    return value if 0 < len(value) <= MAX_FORM_TOKEN and value.isprintable() else None


async def create_key(request: web.Request) -> web.Response:
    """A key made on its group's page, shown there once."""
    form = await request.post()
    group = await admin_service(request).group(request.match_info["name"])

    async def failed(state: FormState) -> web.Response:
        return await _group_page(request, group, key_form=state, status=400)

    return await make_key(request, form, group, failed)


async def make_key(
    request: web.Request,
    form: Form,
    group: Group,
    failed: Callable[[FormState], Awaitable[web.Response]],
) -> web.Response:
    """Create a key in ``group`` from a key form (a group's page's, or the Keys page's):
    its secret is shown once, on the group's page; a form that fails is shown again by
    ``failed``; a form sent twice creates nothing and says so."""
    service = admin_service(request)
    try:
        state, secret = await service.create_key(
            group.name,
            name=_text(form, "name"),
            expires_in_days=_limit(form, "expires_in_days", "Days until it expires"),
            quota=Quota(
                rpm=_limit(form, "rpm", "Requests per minute"),
                tpm=_limit(form, "tpm", "Tokens per minute"),
            ),
            models=_models(form),
            budget_nanos=_budget(form),
            idempotency_key=_idempotency_key(form),
        )
    except KeyReplayed as replay:
        raise web.HTTPSeeOther(f"{group_url(group.name)}?replayed={replay.key_id}#keys") from None
    except InvalidRequest as error:
        return await failed(FormState.failed("new-key", form, error))
    return await _group_page(request, group, new_key={"state": state, "secret": secret})


async def revoke_key(request: web.Request) -> web.Response:
    raw = request.match_info["key_id"]
    number = whole_number(raw, 1, MAX_LIMIT)
    if number is None:
        raise NotFound(f"No key with id '{raw}'.")
    service = admin_service(request)
    state = await service.revoke_key(number)
    names = {group.id: group.name for group in await service.groups()}
    raise web.HTTPSeeOther(group_url(names[state.record.group_id]))
