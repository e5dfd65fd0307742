"""The dashboard's Batches page: every group's batches (or one group's), newest first,
with their progress, what their lines have cost so far and, for an operator, a button to
cancel one in progress; and the files the groups have uploaded (never their bytes)."""

from __future__ import annotations

from urllib.parse import urlencode

from aiohttp import web

from parley.admin import batch_admin
from parley.admin.context import admin_service
from parley.admin.ui.render import page
from parley.errors import InvalidRequest, NotFound

BATCHES = "/admin/ui/batches"


async def batches_page(request: web.Request) -> web.Response:
    service = admin_service(request)
    group = request.query.get("group", "").strip()
    status = request.query.get("status", "").strip()
    error, found, files = "", [], []
    try:
        found = await batch_admin.batches(
            request, service, group, batch_admin.status_filter(request.query)
        )
        files = await batch_admin.files(request, service, group)
    except (InvalidRequest, NotFound) as problem:
        error = problem.message
    query = {name: value for name, value in (("group", group), ("status", status)) if value}
    return page(
        request,
        "batches.html",
        {
            "rows": [state.view() for state in found],
            "files": files,
            "error": error,
            "group": group,
            "status": status,
            "groups": [g.name for g in await service.groups()],
            "statuses": batch_admin.STATUSES,
            "back": f"{BATCHES}?{urlencode(query)}" if query else BATCHES,
        },
    )


async def cancel_batch(request: web.Request) -> web.Response:
    form = await request.post()
    await batch_admin.cancel(request, admin_service(request), request.match_info["batch_id"])
    back = form.get("back")
    raise web.HTTPSeeOther(back if isinstance(back, str) and back.startswith(BATCHES) else BATCHES)
