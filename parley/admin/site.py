"""The /admin sub-application: the JSON API and the dashboard, behind one gate.

* Without ``admin.token`` in the config every /admin request is 404: the surface is off.
* The dashboard (``/admin/``, ``/admin/ui/…``, ``/admin/login``, ``/admin/logout``,
  ``/admin/static/…``) uses the session cookie; everything else is the JSON API and
  needs ``Authorization: Bearer <admin token>``.
* Every reply carries the security headers (CSP without inline script, no framing, no
  referrer). Dashboard failures are pages; API failures are the OpenAI error envelope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from parley.admin.api import API_ROUTES
from parley.admin.auth import Sessions, bearer_token, token_matches
from parley.admin.context import ACTOR, ADMIN_STATE, AdminState, client_address
from parley.admin.ui import forms, pages, session, voices
from parley.admin.ui.render import SECURITY_HEADERS, TEMPLATES, environment, page
from parley.admin.ui.voices import VOICES
from parley.domain.audit import Actor
from parley.errors import AuthenticationFailed, NotFound, ParleyError
from parley.settings import Settings

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
STATIC = Path(__file__).parent / "static"
DASHBOARD_PREFIXES = ("/admin/ui/", "/admin/login", "/admin/logout", "/admin/static/")
ADMIN_OFF = "The admin API is off: set admin.token in the config."


def is_dashboard(path: str) -> bool:
    return path in ("/admin", "/admin/", "/admin/static") or path.startswith(DASHBOARD_PREFIXES)


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers.update(SECURITY_HEADERS)
        raise
    except ParleyError as error:
        error.headers.update(SECURITY_HEADERS)
        raise
    response.headers.update(SECURITY_HEADERS)
    return response


@web.middleware
async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.config_dict.get(ADMIN_STATE)
    if state is None:
        raise NotFound(ADMIN_OFF)
    if is_dashboard(request.path):
        return await _dashboard(request, handler)
    address = client_address(request)
    state.attempts.check(address)
    if not token_matches(bearer_token(request.headers.get("Authorization")), state.token):
        state.attempts.failed(address)
        raise AuthenticationFailed(
            "A valid admin token is required for /admin, as 'Authorization: Bearer <token>'."
        )
    request[ACTOR] = Actor("token", address)
    return await handler(request)


async def _dashboard(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        await session.enter(request)
        return await handler(request)
    except ParleyError as error:
        return _error_page(request, error.message, error.status)
    except web.HTTPNotFound:
        return _error_page(request, "There is no such page in the dashboard.", 404)


def _error_page(request: web.Request, message: str, status: int) -> web.Response:
    context = {"message": message, "back": _back(request), "status": status}
    return page(request, "error.html", context, status=status)


def _back(request: web.Request) -> str:
    """The page to return to from a failed form or a missing page."""
    if request.path.startswith(VOICES):
        return VOICES
    if request.method == "POST":
        parent, _, last = request.path.rpartition("/")
        if last in ("disable", "enable", "keys", "revoke"):
            return parent if "/keys/" not in request.path else "/admin/ui/groups"
        return request.path
    return "/admin/ui/groups" if request.path.startswith("/admin/ui/groups/") else "/admin/"


async def to_dashboard(request: web.Request) -> web.Response:
    raise web.HTTPSeeOther("/admin/")


def admin_app(settings: Settings) -> web.Application:
    """The admin surface as a sub-application, so its checks never run on /v1 calls."""
    admin = web.Application(
        middlewares=[security_headers, gate], client_max_size=settings.server.max_body_bytes
    )
    token = settings.admin.token
    if token:
        admin[ADMIN_STATE] = AdminState(token, Sessions(token))
        admin[TEMPLATES] = environment()
    admin.router.add_routes(API_ROUTES)
    admin.router.add_routes(
        [
            web.get("", to_dashboard),
            web.get("/", pages.overview_page),
            web.get("/login", session.login_page),
            web.post("/login", session.login),
            web.post("/logout", session.logout),
            web.get("/ui/groups", forms.groups_page),
            web.post("/ui/groups", forms.create_group),
            web.get("/ui/groups/{name}", forms.group_page),
            web.post("/ui/groups/{name}", forms.update_group),
            web.post("/ui/groups/{name}/disable", forms.disable_group),
            web.post("/ui/groups/{name}/enable", forms.enable_group),
            web.post("/ui/groups/{name}/keys", forms.create_key),
            web.post("/ui/keys/{key_id}/revoke", forms.revoke_key),
            web.get("/ui/usage", pages.usage_page),
            web.get("/ui/usage.csv", pages.usage_csv),
            web.get("/ui/channels", pages.channels_page),
            web.get("/ui/audit", pages.audit_page),
            web.get("/ui/voices", voices.voices_page),
            web.post("/ui/voices/{model}/{voice_id}/delete", voices.delete_voice),
            web.static("/static", STATIC),
        ]
    )
    return admin
