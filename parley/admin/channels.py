"""/admin/channels: the JSON API of channels managed live (``channel_admin.py``).

``GET /admin/channels`` (in ``api.py``) lists them all; here: one channel, create,
change, disable, enable, delete, test, history, and sealing every credential again
after a key rotation. Documented in ``docs/admin-api.md``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from parley.admin.channel_admin import ChannelAdmin
from parley.admin.context import admin_service
from parley.api.body import read_json
from parley.api.reply import json_reply
from parley.domain.channels import ChannelEvent
from parley.errors import InvalidRequest
from parley.pipeline.context import SERVICES


def channel_admin(request: web.Request) -> ChannelAdmin:
    return ChannelAdmin(admin_service(request), request.config_dict[SERVICES])


def event_view(event: ChannelEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "created_at": event.created_at.isoformat(),
        "kind": event.kind,
        "model": event.model or None,
        "state": event.state,
        "status": event.status,
        "latency_ms": event.latency_ms,
        "message": event.message or None,
        "actor": event.actor,
    }


async def get_channel(request: web.Request) -> web.Response:
    return json_reply(channel_admin(request).view(request.match_info["name"]))


async def create_channel(request: web.Request) -> web.Response:
    body = await read_json(request)
    return json_reply(await channel_admin(request).create(body), status=201)


async def update_channel(request: web.Request) -> web.Response:
    body = await read_json(request)
    return json_reply(await channel_admin(request).update(request.match_info["name"], body))


async def disable_channel(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    return json_reply(await channel_admin(request).set_disabled(name, True))


async def enable_channel(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    return json_reply(await channel_admin(request).set_disabled(name, False))


async def delete_channel(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await channel_admin(request).delete(name)
    return json_reply({"object": "channel", "name": name, "deleted": True})


async def test_channel(request: web.Request) -> web.Response:
    body = await read_json(request) if request.can_read_body else {}
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidRequest("'model' must be a model name.", param="model")
    result = await channel_admin(request).test(request.match_info["name"], model)
    return json_reply(
        {
            "object": "channel.test",
            "channel": request.match_info["name"],
            "model": result.model,
            "ok": result.ok,
            "status": result.status,
            "latency_ms": result.latency_ms,
            "message": result.message or None,
        }
    )


async def channel_history(request: web.Request) -> web.Response:
    events = await channel_admin(request).history(request.match_info["name"])
    return json_reply({"object": "list", "data": [event_view(e) for e in events]})


async def reseal(request: web.Request) -> web.Response:
    count = await channel_admin(request).reseal()
    return json_reply({"object": "channels.reseal", "resealed": count})
