"""/admin: manage groups and keys over HTTP with the operator's admin token.

The admin API calls the store and then updates this instance's directory at once, so a
revoked key stops working here immediately (elsewhere within one refresh interval).
Without ``admin.token`` in the config every /admin call is 404: the API is off.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from parley.api.body import read_json
from parley.api.context import SERVICES
from parley.api.reply import json_reply
from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord, digest, display_prefix, new_key, same_digest
from parley.domain.pricing import nanos_to_usd, usd_to_nanos
from parley.errors import AuthenticationFailed, InvalidRequest, NotFound
from parley.store.base import Conflict, GroupChanges, Missing

LIMIT_FIELDS = ("rpm", "tpm")
MAX_LIMIT = 2_147_483_647
"""Largest rpm, tpm, key id or day count the store's columns hold (32-bit on PostgreSQL)."""
MAX_BUDGET_USD = 1_000_000_000
"""Largest budget: its nano-dollars fit the store's 64-bit column."""
MAX_NAME = 200


def group_view(group: Group) -> dict[str, Any]:
    return {
        "id": group.id,
        "name": group.name,
        "rpm": group.quota.rpm,
        "tpm": group.quota.tpm,
        "models": sorted(group.models) if group.models is not None else None,
        "budget_usd": nanos_to_usd(group.budget_nanos) if group.budget_nanos is not None else None,
    }


def key_view(record: KeyRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "group_id": record.group_id,
        "name": record.name,
        "prefix": record.prefix,
        "created_at": record.created_at.isoformat(),
        "expires_at": record.expires_at.isoformat() if record.expires_at else None,
        "revoked_at": record.revoked_at.isoformat() if record.revoked_at else None,
        "rpm": record.quota.rpm,
        "tpm": record.quota.tpm,
    }


@web.middleware
async def admin_auth(request: web.Request, handler: Any) -> web.StreamResponse:
    token = request.config_dict[SERVICES].settings.admin.token
    if not token:
        raise NotFound("The admin API is off: set admin.token in the config.")
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not same_digest(digest(given), digest(token)):
        raise AuthenticationFailed("A valid admin token is required for /admin.")
    response: web.StreamResponse = await handler(request)
    return response


def _optional_int(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidRequest(
            f"'{name}' must be a positive integer (at most {MAX_LIMIT}) or null.", param=name
        )
    return value


def _printable(value: Any, name: str) -> str:
    """A name the store can hold: a string of at most 200 characters, no control bytes."""
    if not isinstance(value, str) or len(value) > MAX_NAME or not value.isprintable():
        raise InvalidRequest(
            f"'{name}' must be a string of at most {MAX_NAME} printable characters.", param=name
        )
    return value


def _known_name(value: str) -> bool:
    """Whether ``value`` could name a group at all (else it is simply not found)."""
    return len(value) <= MAX_NAME and value.isprintable()


def _models(body: dict[str, Any]) -> frozenset[str] | None:
    value = body.get("models")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise InvalidRequest("'models' must be an array of model names or null.", param="models")
    return frozenset(_printable(name, "models") for name in value)


def _budget(body: dict[str, Any]) -> int | None:
    value = body.get("budget_usd")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        value = -1
    if not 0 <= value <= MAX_BUDGET_USD:
        raise InvalidRequest(
            f"'budget_usd' must be a number from 0 to {MAX_BUDGET_USD} or null.",
            param="budget_usd",
        )
    return usd_to_nanos(value)


async def list_groups(request: web.Request) -> web.Response:
    groups = await request.config_dict[SERVICES].store.list_groups()
    return json_reply({"object": "list", "data": [group_view(g) for g in groups]})


async def create_group(request: web.Request) -> web.Response:
    svc = request.config_dict[SERVICES]
    body = await read_json(request)
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequest("'name' must be a non-empty string.", param="name")
    _printable(name, "name")
    quota = Quota(rpm=_optional_int(body, "rpm"), tpm=_optional_int(body, "tpm"))
    try:
        group = await svc.store.create_group(
            name.strip(), quota=quota, models=_models(body), budget_nanos=_budget(body)
        )
    except Conflict:
        raise InvalidRequest(
            f"A group named '{name}' already exists.", param="name", code="conflict"
        ) from None
    svc.directory.remember_group(group)
    return json_reply(group_view(group), status=201)


async def update_group(request: web.Request) -> web.Response:
    svc = request.config_dict[SERVICES]
    body = await read_json(request)
    changes = GroupChanges(
        rpm=_optional_int(body, "rpm"),
        tpm=_optional_int(body, "tpm"),
        models=_models(body),
        budget_nanos=_budget(body),
        clear_rpm="rpm" in body and body["rpm"] is None,
        clear_tpm="tpm" in body and body["tpm"] is None,
        clear_models="models" in body and body["models"] is None,
        clear_budget="budget_usd" in body and body["budget_usd"] is None,
    )
    try:
        if not _known_name(request.match_info["name"]):
            raise Missing
        group = await svc.store.update_group(request.match_info["name"], changes)
    except Missing:
        raise NotFound(f"No group named '{request.match_info['name']}'.") from None
    svc.directory.remember_group(group)
    return json_reply(group_view(group))


async def list_keys(request: web.Request) -> web.Response:
    store = request.config_dict[SERVICES].store
    group_id = None
    if "group" in request.query:
        known = _known_name(request.query["group"])
        group = await store.get_group(request.query["group"]) if known else None
        if group is None:
            raise NotFound(f"No group named '{request.query['group']}'.")
        group_id = group.id
    records = await store.list_keys(group_id)
    return json_reply({"object": "list", "data": [key_view(r) for r in records]})


async def create_key(request: web.Request) -> web.Response:
    svc = request.config_dict[SERVICES]
    body = await read_json(request)
    wanted = body.get("group")
    group = None
    if isinstance(wanted, str) and _known_name(wanted):
        group = await svc.store.get_group(wanted)
    if group is None:
        raise InvalidRequest("'group' must name an existing group.", param="group")
    days = _optional_int(body, "expires_in_days")
    secret = new_key()
    record = await svc.store.create_key(
        group.id,
        name=_printable(body.get("name") or "", "name"),
        digest=digest(secret),
        prefix=display_prefix(secret),
        expires_at=datetime.now(UTC) + timedelta(days=days) if days else None,
        quota=Quota(rpm=_optional_int(body, "rpm"), tpm=_optional_int(body, "tpm")),
    )
    svc.directory.remember_key(record)
    return json_reply({**key_view(record), "key": secret}, status=201)


async def revoke_key(request: web.Request) -> web.Response:
    svc = request.config_dict[SERVICES]
    try:
        key_id = int(request.match_info["key_id"])
        if not 1 <= key_id <= MAX_LIMIT:
            raise Missing
        record = await svc.store.revoke_key(key_id, datetime.now(UTC))
    except (ValueError, Missing):
        raise NotFound(f"No key with id '{request.match_info['key_id']}'.") from None
    svc.directory.remember_key(record)
    return json_reply(key_view(record))


def admin_app(client_max_size: int) -> web.Application:
    """The admin API as a sub-application, so its check never runs on /v1 calls."""
    admin = web.Application(middlewares=[admin_auth], client_max_size=client_max_size)
    admin.router.add_routes(
        [
            web.get("/groups", list_groups),
            web.post("/groups", create_group),
            web.patch("/groups/{name}", update_group),
            web.get("/keys", list_keys),
            web.post("/keys", create_key),
            web.delete("/keys/{key_id}", revoke_key),
        ]
    )
    return admin
