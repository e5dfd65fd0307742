"""/admin/models: the JSON API of models managed live (``model_admin.py``): list (the
config file's too, read-only), one model, create, change (a price at once or from a
stated instant), delete. Documented in ``docs/admin-api.md``."""

from __future__ import annotations

from aiohttp import web

from parley.admin.context import admin_service
from parley.admin.model_admin import ModelAdmin
from parley.api.body import read_json
from parley.api.reply import json_reply
from parley.pipeline.context import SERVICES


def model_admin(request: web.Request) -> ModelAdmin:
    return ModelAdmin(admin_service(request), request.config_dict[SERVICES])


async def list_models(request: web.Request) -> web.Response:
    return json_reply({"object": "list", "data": model_admin(request).views()})


async def get_model(request: web.Request) -> web.Response:
    return json_reply(model_admin(request).view(request.match_info["name"]))


async def create_model(request: web.Request) -> web.Response:
    body = await read_json(request)
    return json_reply(await model_admin(request).create(body), status=201)


async def update_model(request: web.Request) -> web.Response:
    body = await read_json(request)
    return json_reply(await model_admin(request).update(request.match_info["name"], body))


async def delete_model(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await model_admin(request).delete(name)
    return json_reply({"object": "model.entry", "name": name, "deleted": True})
