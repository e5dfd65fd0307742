"""The dashboard's Requests page: the request log with the admin API's filters, a page at
a time (a cursor link to older lines), one line's details, and the CSV export."""

from __future__ import annotations

from typing import cast
from urllib.parse import urlencode

from aiohttp import web

from parley.admin.context import ROLE, admin_service
from parley.admin.request_log import (
    Filters,
    Page,
    export_csv,
    filters_from_params,
    find_line,
    line_view,
    read_page,
)
from parley.admin.roles import CONTENT_ROLE
from parley.admin.ui.render import page
from parley.credentials import SealError
from parley.domain.accounts import ROLES, Role, allows
from parley.errors import InvalidRequest, NotFound
from parley.pipeline.context import SERVICES

PRICE_UNITS = {
    "input_per_1k": "per 1K input tokens",
    "output_per_1k": "per 1K output tokens",
    "cached_input_per_1k": "per 1K cached input tokens",
    "cache_write_per_1k": "per 1K cache-write tokens",
    "per_1k_characters": "per 1K characters",
    "per_minute": "per minute of audio",
    "per_search_unit": "per search unit",
    "image_input_per_1k": "per 1K image input tokens",
    "audio_input_per_1k": "per 1K audio input tokens",
    "cached_audio_input_per_1k": "per 1K cached audio input tokens",
    "audio_output_per_1k": "per 1K audio output tokens",
}
"""How the request page names each unit price the call was billed at."""
STATUS_CHOICES = ("2xx", "4xx", "400", "401", "403", "404", "429", "5xx", "502", "504")


async def requests_page(request: web.Request) -> web.Response:
    service = admin_service(request)
    error, filters, found = "", Filters(), None
    try:
        filters = filters_from_params(request.query)
        found = await read_page(service, filters, request.query.get("cursor") or None)
    except (InvalidRequest, NotFound) as problem:
        error = problem.message
    svc = request.config_dict[SERVICES]
    return page(
        request,
        "requests.html",
        {
            "filters": filters,
            "found": found,
            "rows": [line_view(line) for line in found.lines] if found else [],
            "error": error,
            "groups": [group.name for group in await service.groups()],
            "models": svc.model_names(),
            "statuses": STATUS_CHOICES,
            "query": urlencode(filters.params()),
            "older": _older(found),
        },
    )


async def request_page(request: web.Request) -> web.Response:
    """One line's details and, for a role that may read it (``CONTENT_ROLE``), the call's
    kept content: opening the page with content to show is an audited view of it."""
    service = admin_service(request)
    line = await find_line(service, request.match_info["request_id"])
    content, state, problem = None, "hidden", ""
    role = request.get(ROLE, "")
    if role in ROLES and allows(cast(Role, role), CONTENT_ROLE):
        contents = request.config_dict[SERVICES].contents
        try:
            content = await service.call_content(line.record.request_id, contents.opened)
            state = "none" if content is None else "shown"
        except SealError as error:
            state, problem = "unopened", str(error)
    return page(
        request,
        "request.html",
        {
            "line": line_view(line),
            "price_units": PRICE_UNITS,
            "content": content,
            "content_state": state,
            "problem": problem,
        },
    )


async def requests_csv(request: web.Request) -> web.Response:
    csv = await export_csv(admin_service(request), filters_from_params(request.query))
    return web.Response(
        text=csv,
        content_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="parley-requests.csv"'},
    )


def _older(found: Page | None) -> str | None:
    if found is None or found.next_cursor is None:
        return None
    return "/admin/ui/requests?" + urlencode(found.filters.params(found.next_cursor))
