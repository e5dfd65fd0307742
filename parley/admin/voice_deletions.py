"""/admin/voice-deletions: the deleted clones whose copies on their engines are still to
delete (``voices/deletions.py``), each with its attempts and last error; an operator
tries one again now, or gives it up. Both are audited (``AdminService``)."""

from __future__ import annotations

from aiohttp import web

from parley.admin.context import admin_service
from parley.admin.fields import MAX_LIMIT
from parley.admin.views import deletion_view
from parley.api.reply import json_reply
from parley.domain.numbers import whole_number
from parley.errors import NotFound


def deletion_id(request: web.Request) -> int:
    raw = request.match_info["deletion_id"]
    number = whole_number(raw, 1, MAX_LIMIT)
    if number is None:
        raise NotFound(f"No clone deletion {raw!r} is still to do.", param="deletion_id")
    return number


async def list_deletions(request: web.Request) -> web.Response:
    """Every deletion still to do, oldest first, of one group and/or one model."""
    service = admin_service(request)
    found = await service.clone_deletions(request.query.get("group"), request.query.get("model"))
    names = {group.id: group.name for group in await service.groups()}
    return json_reply({"object": "list", "data": [deletion_view(d, names) for d in found]})


async def retry_deletion(request: web.Request) -> web.Response:
    """One attempt now: the row as it stands after it, and whether the engine is done."""
    service = admin_service(request)
    before, after = await service.retry_clone_deletion(deletion_id(request))
    names = {group.id: group.name for group in await service.groups()}
    view = deletion_view(after if after is not None else before, names)
    return json_reply({**view, "deleted": after is None})


async def abandon_deletion(request: web.Request) -> web.Response:
    service = admin_service(request)
    given_up = await service.abandon_clone_deletion(deletion_id(request))
    names = {group.id: group.name for group in await service.groups()}
    return json_reply({**deletion_view(given_up, names), "abandoned": True})
