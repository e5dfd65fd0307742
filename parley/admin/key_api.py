"""/admin JSON API for one key as a product: read it with its own budget, change its
label, rates, models, budget and expiry, and rotate its secret with a grace period.

The handlers go through ``AdminService`` like the rest of ``api.py`` (audited, applied
to this instance's directory at once). Documented in ``docs/admin-api.md``.
"""

from __future__ import annotations

from aiohttp import web

from parley.admin.context import admin_service
from parley.admin.fields import MAX_LIMIT, grace, key_changes
from parley.admin.views import key_view
from parley.api.body import read_json
from parley.api.reply import json_reply
from parley.domain.numbers import whole_number
from parley.errors import NotFound


def key_id(request: web.Request) -> int:
    raw = request.match_info["key_id"]
    number = whole_number(raw, 1, MAX_LIMIT)
    if number is None:
        raise NotFound(f"No key with id '{raw}'.", param="key_id")
    return number


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
