"""The dashboard's Voices page: every group's clones, filtered by group and model, each
deletable (on its engine, then in the registry) through ``AdminService.delete_clone``."""

from __future__ import annotations

from urllib.parse import urlencode

from aiohttp import web

from parley.admin.context import admin_service
from parley.admin.ui.render import page
from parley.pipeline.context import SERVICES

VOICES = "/admin/ui/voices"


async def voices_page(request: web.Request) -> web.Response:
    service = admin_service(request)
    group = request.query.get("group") or None
    model = request.query.get("model") or None
    clones = await service.clones(group, model)
    groups = await service.groups()
    svc = request.config_dict[SERVICES]
    return page(
        request,
        "voices.html",
        {
            "clones": clones,
            "names": {g.id: g.name for g in groups},
            "groups": [g.name for g in groups],
            "models": [m.name for m in svc.settings.models if m.kind == "speech"],
            "group": group,
            "model": model,
            "back": _filtered(group, model),
        },
    )


async def delete_voice(request: web.Request) -> web.Response:
    form = await request.post()
    await admin_service(request).delete_clone(
        request.match_info["model"], request.match_info["voice_id"]
    )
    back = form.get("back")
    target = back if isinstance(back, str) and back.startswith(VOICES) else VOICES
    raise web.HTTPSeeOther(target)


def _filtered(group: str | None, model: str | None) -> str:
    query = {name: value for name, value in (("group", group), ("model", model)) if value}
    return f"{VOICES}?{urlencode(query)}" if query else VOICES
