"""The dashboard's Voices page: every group's clones, searched and filtered by group and
model, each deletable (out of the registry, then on its engine) through
``AdminService.delete_clone``; the deletions the engines have not done yet, with their
attempts and last error, each to try again now or give up; and a speech model's
built-in roster when one is chosen."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

from aiohttp import web

from parley.admin.context import admin_service
from parley.admin.finding import DEFAULT_PAGE, clone_finder, listing_from_params
from parley.admin.roster import builtin_voices
from parley.admin.ui.render import page
from parley.admin.voice_deletions import deletion_id
from parley.errors import ParleyError
from parley.pipeline.context import SERVICES

VOICES = "/admin/ui/voices"


async def voices_page(request: web.Request) -> web.Response:
    service = admin_service(request)
    group = request.query.get("group") or None
    model = request.query.get("model") or None
    clones = await service.clones(group, model)
    deletions = await service.clone_deletions(group, model)
    groups = await service.groups()
    names = {g.id: g.name for g in groups}
    finder = clone_finder(names)
    listing = listing_from_params(request.query, finder.sort_names(), default_limit=DEFAULT_PAGE)
    if not request.query.get("sort"):
        listing = replace(listing, descending=True)  # newest first
    found = finder.find(clones, listing)
    svc = request.config_dict[SERVICES]
    roster, roster_error = None, ""
    if model is not None:
        try:
            roster = await builtin_voices(svc, model)
        except ParleyError as error:
            roster_error = error.message
    back = _filtered(group, model, listing.q)
    return page(
        request,
        "voices.html",
        {
            "found": found,
            "deletions": deletions,
            "names": names,
            "groups": [g.name for g in groups],
            "models": [m.name for m in svc.settings.models if m.kind == "speech"],
            "group": group,
            "model": model,
            "q": listing.q,
            "roster": roster,
            "roster_error": roster_error,
            "back": back,
            "next_url": _page_url(back, found.next_offset),
            "previous_url": _page_url(back, found.previous_offset),
        },
    )


def _page_url(base: str, offset: int | None) -> str:
    if offset is None:
        return ""
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}offset={offset}" if offset else base


async def delete_voice(request: web.Request) -> web.Response:
    form = await request.post()
    await admin_service(request).delete_clone(
        request.match_info["model"], request.match_info["voice_id"]
    )
    raise web.HTTPSeeOther(_back(form.get("back")))


async def retry_deletion(request: web.Request) -> web.Response:
    form = await request.post()
    await admin_service(request).retry_clone_deletion(deletion_id(request))
    raise web.HTTPSeeOther(_back(form.get("back")))


async def abandon_deletion(request: web.Request) -> web.Response:
    form = await request.post()
    await admin_service(request).abandon_clone_deletion(deletion_id(request))
    raise web.HTTPSeeOther(_back(form.get("back")))


def _back(back: object) -> str:
    return back if isinstance(back, str) and back.startswith(VOICES) else VOICES


def _filtered(group: str | None, model: str | None, q: str = "") -> str:
    pairs = (("group", group), ("model", model), ("q", q))
    query = {name: value for name, value in pairs if value}
    return f"{VOICES}?{urlencode(query)}" if query else VOICES
