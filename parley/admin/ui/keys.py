"""The dashboard's page for one key: what it is and may do, its own budget and usage this
period, a form to change its label, rates, budget, models and expiry, and rotation.

Rotation shows the new secret once, in the reply to its form. The form names the secret
it rotates (its prefix): sent again after the rotation (a reload), it names a secret the
key no longer has, so nothing is rotated twice and the page says so.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from parley.admin.context import admin_service
from parley.admin.finding import DEFAULT_PAGE, key_finder, listing_from_params
from parley.admin.reports import UsageQuery
from parley.admin.ui.fields import FormState
from parley.admin.ui.forms import (
    Form,
    _budget,
    _context,
    _limit,
    _models,
    _text,
    group_url,
    limits_values,
    make_key,
    new_key_form,
)
from parley.admin.ui.render import page
from parley.admin.views import KeyState
from parley.errors import InvalidRequest, NotFound
from parley.runtime.budget import period_start
from parley.store.base import KeyChanges

MAX_GRACE_MINUTES = 30 * 24 * 60
DEFAULT_GRACE_MINUTES = 60
MAX_LABEL = 200
KEY_STATUSES = ("active", "group_disabled", "expired", "revoked")


def key_url(key_id: int) -> str:
    return f"/admin/ui/keys/{key_id}"


def _key_id(request: web.Request) -> int:
    raw = request.match_info["key_id"]
    if not raw.isdecimal() or len(raw) > 10:
        raise NotFound(f"No key with id '{raw}'.")
    return int(raw)


def key_values(state: KeyState) -> dict[str, Any]:
    record = state.record
    values = limits_values(record.quota.rpm, record.quota.tpm, record.budget_nanos, record.models)
    expires = record.expires_at.date().isoformat() if record.expires_at else ""
    return {**values, "name": record.name, "expires_on": expires}


async def key_page(
    request: web.Request,
    *,
    edit: FormState | None = None,
    rotate: FormState | None = None,
    rotated: str = "",
    notice: str = "",
    status: int = 200,
) -> web.Response:
    service = admin_service(request)
    state = await service.find_key(_key_id(request))
    record = state.record
    groups = {group.id: group for group in await service.groups()}
    group = groups[record.group_id]
    today = datetime.now(UTC).date()
    start = period_start(service.period, datetime.now(UTC))
    usage = await service.usage(UsageQuery(start, today, group.name, None, ("model",), record.id))
    now = datetime.now(UTC)
    saved = request.query.get("saved") == "1"
    return page(
        request,
        "key.html",
        {
            "state": state,
            "key": record,
            "group": group,
            "budget": await service.key_budget(record),
            "usage": usage,
            "edit": edit or FormState.fresh("key", key_values(state)),
            "rotate": rotate
            or FormState.fresh("rotate", {"grace_minutes": str(DEFAULT_GRACE_MINUTES)}),
            "rotated": rotated,
            "notice": notice or ("Saved." if saved else ""),
            "previous_valid": record.previous_until if record.previous_valid_at(now) else None,
            "max_grace_minutes": MAX_GRACE_MINUTES,
            "key_models": sorted(group.models)
            if group.models is not None
            else _context(request)["models"],
            "group_link": group_url(group.name),
            **{k: v for k, v in _context(request).items() if k != "models"},
        },
        status=status,
    )


async def keys_page(
    request: web.Request, *, key_form: FormState | None = None, status_code: int = 200
) -> web.Response:
    """Every group's keys, searched by label, prefix (a former one too) or group, by
    status, sorted, paged, with their own rates, budget and models; and a form to create
    a key in any group."""
    service = admin_service(request)
    groups = await service.groups()
    names = {group.id: group.name for group in groups}
    finder = key_finder(names)
    listing = listing_from_params(request.query, finder.sort_names(), default_limit=DEFAULT_PAGE)
    if not request.query.get("sort"):
        listing = replace(listing, descending=True)  # newest first
    status = request.query.get("status", "")
    states = await service.keys()
    if status in KEY_STATUSES:
        states = [state for state in states if state.status == status]
    found = finder.find(states, listing)
    sort_value = ("-" if listing.descending else "") + listing.sort

    def page_url(**change: Any) -> str:
        query = {"q": listing.q, "status": status, "sort": sort_value, "offset": listing.offset}
        query.update(change)
        kept = {name: value for name, value in query.items() if value not in ("", 0, None)}
        return "/admin/ui/keys" + (f"?{urlencode(kept)}" if kept else "")

    return page(
        request,
        "keys.html",
        {
            "budgets": {
                state.record.id: await service.key_budget(state.record) for state in found.items
            },
            "key_form": key_form or new_key_form(),
            "group_names": sorted(names.values()),
            "key_models": _context(request)["models"],
            **{k: v for k, v in _context(request).items() if k != "models"},
            "found": found,
            "listing": listing,
            "names": names,
            "status": status,
            "statuses": KEY_STATUSES,
            "sort_value": sort_value,
            "page_url": page_url,
        },
        status=status_code,
    )


async def create_key(request: web.Request) -> web.Response:
    """A key made on the Keys page, in the group its form names (shown once on the group's
    page, as a key made there)."""
    form = await request.post()
    service = admin_service(request)

    async def failed(state: FormState) -> web.Response:
        return await keys_page(request, key_form=state, status_code=400)

    name = _text(form, "group")
    try:  # the caller's service: a group-admin's finds its own group alone
        group = await service.group(name)
    except NotFound:
        problem = InvalidRequest("Choose the group the key is for.", param="group")
        return await failed(FormState.failed("new-key", form, problem))
    return await make_key(request, form, group, failed)


async def show_key(request: web.Request) -> web.Response:
    return await key_page(request)


def _label(form: Form) -> str:
    label = _text(form, "name")
    if len(label) > MAX_LABEL or not label.isprintable():
        raise InvalidRequest(f"A label is at most {MAX_LABEL} printable characters.", param="name")
    return label


def _expiry(form: Form) -> date | None:
    raw = _text(form, "expires_on")
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(
            "The expiry must be a date (YYYY-MM-DD), or empty for never.", param="expires_on"
        ) from None


def _changes(form: Form, current: datetime | None) -> KeyChanges:
    """The form's changes; an expiry date left as shown keeps the time of day it has."""
    rpm = _limit(form, "rpm", "Requests per minute")
    tpm = _limit(form, "tpm", "Tokens per minute")
    budget, models, expires = _budget(form), _models(form), _expiry(form)
    unchanged = current is not None and expires == current.date()
    ends = datetime(expires.year, expires.month, expires.day, tzinfo=UTC) if expires else None
    return KeyChanges(
        name=_label(form),
        rpm=rpm,
        tpm=tpm,
        budget_nanos=budget,
        models=models,
        expires_at=None if unchanged else ends,
        clear_rpm=rpm is None,
        clear_tpm=tpm is None,
        clear_budget=budget is None,
        clear_models=models is None,
        clear_expiry=ends is None,
    )


async def update_key(request: web.Request) -> web.Response:
    form = await request.post()
    service = admin_service(request)
    state = await service.find_key(_key_id(request))
    try:
        changes = _changes(form, state.record.expires_at)
    except InvalidRequest as error:
        return await key_page(request, edit=FormState.failed("key", form, error), status=400)
    await service.update_key(state.record.id, changes)
    raise web.HTTPSeeOther(f"{key_url(state.record.id)}?saved=1")


def _grace(form: Form) -> timedelta:
    """Minutes, whole or not (0.5 is thirty seconds), from 0 to 30 days."""
    raw = _text(form, "grace_minutes")
    try:
        if len(raw) > 12:
            raise ValueError(raw)
        minutes = float(raw)
    except ValueError:
        minutes = -1.0
    if not 0 <= minutes <= MAX_GRACE_MINUTES:
        raise InvalidRequest(
            f"The old secret's grace is a number of minutes from 0 to {MAX_GRACE_MINUTES}.",
            param="grace_minutes",
        )
    return timedelta(minutes=minutes)


async def rotate_key(request: web.Request) -> web.Response:
    form = await request.post()
    service = admin_service(request)
    state = await service.find_key(_key_id(request))
    if _text(form, "prefix") != state.record.prefix:
        notice = "This key was already rotated by that form; nothing was rotated again."
        return await key_page(request, notice=notice)
    try:
        grace = _grace(form)
    except InvalidRequest as error:
        failed = FormState.failed("rotate", form, error)
        return await key_page(request, rotate=failed, status=400)
    _, secret = await service.rotate_key(state.record.id, grace)
    return await key_page(request, rotated=secret)
