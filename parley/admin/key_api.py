"""/admin JSON API for one key as a product: read it with its own budget, change its
label, rates, models, budget and expiry, and rotate its secret with a grace period.

The handlers go through ``AdminService`` like the rest of ``api.py`` (audited, applied
to this instance's directory at once). Documented in ``docs/admin-api.md``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from parley.admin.api import MAX_LIMIT, _budget, _models, optional_int, printable
from parley.admin.context import admin_service
from parley.admin.views import key_view
from parley.api.body import read_json
from parley.api.reply import json_reply
from parley.errors import InvalidRequest, NotFound
from parley.store.base import KeyChanges

MAX_GRACE_SECONDS = 30 * 86_400
"""The longest an old secret may stay valid after a rotation: 30 days."""
DEFAULT_GRACE_SECONDS = 3_600
"""An hour, when the operator does not say: time to roll the new secret out."""


def key_id(request: web.Request) -> int:
    raw = request.match_info["key_id"]
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise NotFound(f"No key with id '{raw}'.", param="key_id")
    return int(raw)


def expiry(body: dict[str, Any]) -> datetime | None:
    """``expires_at`` as an ISO 8601 time (a zone-less one is UTC), or ``expires_in_days``."""
    days = optional_int(body, "expires_in_days")
    if days is not None:
        return datetime.now(UTC) + timedelta(days=min(days, 36_500))
    raw = body.get("expires_at")
    if raw is None:
        return None
    try:
        if not isinstance(raw, str) or len(raw) > 40:
            raise ValueError(raw)
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(
            "'expires_at' must be an ISO 8601 time, e.g. 2027-01-31T00:00:00Z, or null.",
            param="expires_at",
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def key_changes(body: dict[str, Any]) -> KeyChanges:
    """What a PATCH asks for: a field present and null clears it (back to the group's)."""
    name = body.get("name")
    return KeyChanges(
        name=printable(name, "name") if name is not None else None,
        rpm=optional_int(body, "rpm"),
        tpm=optional_int(body, "tpm"),
        models=_models(body),
        budget_nanos=_budget(body),
        expires_at=expiry(body),
        clear_rpm="rpm" in body and body["rpm"] is None,
        clear_tpm="tpm" in body and body["tpm"] is None,
        clear_models="models" in body and body["models"] is None,
        clear_budget="budget_usd" in body and body["budget_usd"] is None,
        clear_expiry="expires_at" in body and body["expires_at"] is None,
    )


def grace(body: dict[str, Any]) -> timedelta:
    value = body.get("grace_seconds", DEFAULT_GRACE_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_GRACE_SECONDS:
        raise InvalidRequest(
            f"'grace_seconds' must be a whole number from 0 to {MAX_GRACE_SECONDS}.",
            param="grace_seconds",
        )
    return timedelta(seconds=value)


async def _names(request: web.Request) -> dict[int, str]:
    return {group.id: group.name for group in await admin_service(request).groups()}


async def get_key(request: web.Request) -> web.Response:
    service = admin_service(request)
    state = await service.find_key(key_id(request))
    budget = await service.key_budget(state.record)
    return json_reply({**key_view(state, await _names(request)), "budget": budget.view()})


async def update_key(request: web.Request) -> web.Response:
    changes = key_changes(await read_json(request))
    state = await admin_service(request).update_key(key_id(request), changes)
    return json_reply(key_view(state, await _names(request)))


async def rotate_key(request: web.Request) -> web.Response:
    body = await read_json(request) if request.body_exists else {}
    state, secret = await admin_service(request).rotate_key(key_id(request), grace(body))
    return json_reply({**key_view(state, await _names(request)), "key": secret})
