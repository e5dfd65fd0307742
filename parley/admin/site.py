"""The /admin sub-application: the JSON API and the dashboard, behind one gate.

* Without ``admin.token`` in the config every /admin request is 404: the surface is off.
* The dashboard (``/admin/``, ``/admin/ui/…``, ``/admin/login``, ``/admin/logout``,
  ``/admin/static/…``) uses the session cookie; everything else is the JSON API and
  needs ``Authorization: Bearer <admin token>`` or an administrator's name and password
  (HTTP Basic). Every route then needs the role ``roles.py`` gives it.
* Every reply carries the security headers (CSP without inline script, no framing, no
  referrer). Dashboard failures are pages; API failures are the OpenAI error envelope.
"""

from __future__ import annotations

from functools import wraps
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler

from parley.admin.auth import Sessions
from parley.admin.context import (
    ADMIN_STATE,
    TEMPLATES,
    AdminState,
    CookiePolicy,
    Templates,
)
from parley.edge.deferred import deferred
from parley.edge.routing import Edge, behind, catch_all, unrouted
from parley.errors import NotFound, ParleyError
from parley.pipeline.context import REPLY_HEADERS
from parley.settings import OidcSettings, Settings

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {path.name: path for path in STATIC.iterdir() if path.is_file()}
"""The dashboard's files by name, read once: a request names one of them or none."""
DASHBOARD_PREFIXES = (
    "/admin/ui/",
    "/admin/login",
    "/admin/logout",
    "/admin/static/",
    "/admin/sso/",
)
ADMIN_OFF = "The admin API is off: set admin.token in the config."
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
}
HANDLERS = (
    ("GET", "/groups", "api:list_groups"),
    ("POST", "/groups", "api:create_group"),
    ("GET", "/groups/{name}", "api:get_group"),
    ("PATCH", "/groups/{name}", "api:update_group"),
    ("POST", "/groups/{name}/disable", "api:disable_group"),
    ("POST", "/groups/{name}/enable", "api:enable_group"),
    ("GET", "/keys", "api:list_keys"),
    ("POST", "/keys", "api:create_key"),
    ("DELETE", "/keys/{key_id}", "api:revoke_key"),
    ("GET", "/keys/{key_id}", "key_api:get_key"),
    ("PATCH", "/keys/{key_id}", "key_api:update_key"),
    ("POST", "/keys/{key_id}/rotate", "key_api:rotate_key"),
    ("GET", "/usage", "api:usage"),
    ("GET", "/batches", "api:list_batches"),
    ("GET", "/batches/{batch_id}", "api:get_batch"),
    ("POST", "/batches/{batch_id}/cancel", "api:cancel_batch"),
    ("GET", "/files", "api:list_files"),
    ("GET", "/requests", "api:list_requests"),
    ("GET", "/requests/{request_id}", "api:get_request"),
    ("GET", "/requests/{request_id}/content", "api:get_request_content"),
    ("GET", "/overview", "api:get_overview"),
    ("GET", "/channels", "api:list_channels"),
    ("POST", "/channels", "channels:create_channel"),
    ("POST", "/channels/reseal", "channels:reseal"),
    ("GET", "/channels/{name}", "channels:get_channel"),
    ("PATCH", "/channels/{name}", "channels:update_channel"),
    ("DELETE", "/channels/{name}", "channels:delete_channel"),
    ("POST", "/channels/{name}/disable", "channels:disable_channel"),
    ("POST", "/channels/{name}/enable", "channels:enable_channel"),
    ("POST", "/channels/{name}/test", "channels:test_channel"),
    ("GET", "/channels/{name}/history", "channels:channel_history"),
    ("GET", "/models", "model_api:list_models"),
    ("POST", "/models", "model_api:create_model"),
    ("GET", "/models/{name}", "model_api:get_model"),
    ("PATCH", "/models/{name}", "model_api:update_model"),
    ("DELETE", "/models/{name}", "model_api:delete_model"),
    ("GET", "/accounts", "accounts:list_accounts"),
    ("POST", "/accounts", "accounts:create_account"),
    ("PATCH", "/accounts/{name}", "accounts:update_account"),
    ("DELETE", "/accounts/{name}", "accounts:delete_account"),
    ("GET", "/audit", "api:audit"),
    ("GET", "/voices", "api:list_voices"),
    ("GET", "/voices/roster", "roster:get_roster"),
    ("DELETE", "/voices/{model}/{voice_id}", "api:delete_voice"),
    ("GET", "/voice-deletions", "voice_deletions:list_deletions"),
    ("POST", "/voice-deletions/{deletion_id}/retry", "voice_deletions:retry_deletion"),
    ("DELETE", "/voice-deletions/{deletion_id}", "voice_deletions:abandon_deletion"),
    ("GET", "/", "ui.pages:overview_page"),
    ("GET", "/login", "ui.session:login_page"),
    ("POST", "/login", "ui.session:login"),
    ("POST", "/logout", "ui.session:logout"),
    ("GET", "/sso/start", "ui.sso:start"),
    ("GET", "/sso/callback", "ui.sso:callback"),
    ("GET", "/ui/groups", "ui.forms:groups_page"),
    ("POST", "/ui/groups", "ui.forms:create_group"),
    ("GET", "/ui/groups/{name}", "ui.forms:group_page"),
    ("POST", "/ui/groups/{name}", "ui.forms:update_group"),
    ("POST", "/ui/groups/{name}/disable", "ui.forms:disable_group"),
    ("POST", "/ui/groups/{name}/enable", "ui.forms:enable_group"),
    ("POST", "/ui/groups/{name}/content", "ui.forms:update_content"),
    ("POST", "/ui/groups/{name}/keys", "ui.forms:create_key"),
    ("POST", "/ui/keys/{key_id}/revoke", "ui.forms:revoke_key"),
    ("GET", "/ui/keys", "ui.keys:keys_page"),
    ("POST", "/ui/keys", "ui.keys:create_key"),
    ("GET", "/ui/keys/{key_id}", "ui.keys:show_key"),
    ("POST", "/ui/keys/{key_id}", "ui.keys:update_key"),
    ("POST", "/ui/keys/{key_id}/rotate", "ui.keys:rotate_key"),
    ("GET", "/ui/usage", "ui.pages:usage_page"),
    ("GET", "/ui/usage.csv", "ui.pages:usage_csv"),
    ("GET", "/ui/batches", "ui.batches:batches_page"),
    ("POST", "/ui/batches/{batch_id}/cancel", "ui.batches:cancel_batch"),
    ("GET", "/ui/requests", "ui.requests:requests_page"),
    ("GET", "/ui/requests.csv", "ui.requests:requests_csv"),
    ("GET", "/ui/requests/{request_id}", "ui.requests:request_page"),
    ("GET", "/ui/realtime", "ui.realtime:realtime_page"),
    ("GET", "/ui/realtime/talk", "ui.realtime:talk_page"),
    ("POST", "/ui/realtime/talk", "ui.realtime:talk_secret"),
    ("GET", "/ui/channels", "ui.pages:channels_page"),
    ("POST", "/ui/channels", "ui.channel_pages:create_channel"),
    ("GET", "/ui/channels/{name}", "ui.channel_pages:channel_page"),
    ("POST", "/ui/channels/{name}", "ui.channel_pages:update_channel"),
    ("POST", "/ui/channels/{name}/disable", "ui.channel_pages:disable_channel"),
    ("POST", "/ui/channels/{name}/enable", "ui.channel_pages:enable_channel"),
    ("POST", "/ui/channels/{name}/delete", "ui.channel_pages:delete_channel"),
    ("POST", "/ui/channels/{name}/test", "ui.channel_pages:test_channel"),
    ("GET", "/ui/models", "ui.model_pages:models_page"),
    ("POST", "/ui/models", "ui.model_pages:create_model"),
    ("GET", "/ui/models/{name}", "ui.model_pages:model_page"),
    ("POST", "/ui/models/{name}", "ui.model_pages:update_model"),
    ("POST", "/ui/models/{name}/delete", "ui.model_pages:delete_model"),
    ("GET", "/ui/accounts", "ui.account_pages:accounts_page"),
    ("POST", "/ui/accounts", "ui.account_pages:create_account"),
    ("POST", "/ui/accounts/{name}", "ui.account_pages:update_account"),
    ("POST", "/ui/accounts/{name}/delete", "ui.account_pages:delete_account"),
    ("GET", "/ui/audit", "ui.pages:audit_page"),
    ("GET", "/ui/voices", "ui.voices:voices_page"),
    ("POST", "/ui/voices/{model}/{voice_id}/delete", "ui.voices:delete_voice"),
    ("POST", "/ui/voice-deletions/{deletion_id}/retry", "ui.voices:retry_deletion"),
    ("POST", "/ui/voice-deletions/{deletion_id}/abandon", "ui.voices:abandon_deletion"),
)
"""Method, path and handler (``parley.admin.<module>:<function>``): the JSON API
(``api.py``) and the dashboard's pages (``ui/``, with Jinja2). Each module is imported by
the first request that reaches it (``parley.edge.deferred``), not by every worker."""


def is_dashboard(path: str) -> bool:
    return path in ("/admin", "/admin/", "/admin/static") or path.startswith(DASHBOARD_PREFIXES)


def checked(handler: Handler) -> Handler:
    """An admin route's handler behind the admin's checks (``gate``), its replies and
    refusals with the security headers."""

    @wraps(handler)
    async def admin_route(request: web.Request) -> web.StreamResponse:
        return await security_headers(request, handler)

    return admin_route


async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """What ``gate`` answers for ``handler``, with the security headers."""
    try:
        response = await gate(request, handler)
    except (web.HTTPException, ParleyError) as failure:
        # The edge renders a refusal with the reply headers as its base; a redirect
        # (an HTTPException below 400) goes out as it is, with its own headers.
        if isinstance(failure, web.HTTPException):
            failure.headers.update(SECURITY_HEADERS)
        request[REPLY_HEADERS] = {**request.get(REPLY_HEADERS, {}), **SECURITY_HEADERS}
        raise
    response.headers.update(SECURITY_HEADERS)
    return response


async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.config_dict.get(ADMIN_STATE)
    if state is None:
        raise NotFound(ADMIN_OFF)
    if is_dashboard(request.path):
        from parley.admin.ui.gate import serve_page  # the dashboard and Jinja2, on first use

        return await serve_page(request, handler)
    from parley.admin.signin import api_identity, require_role  # loaded by the first admin call
    from parley.admin.tenancy import admit

    await api_identity(request, state)
    await admit(request)
    require_role(request)
    return await handler(request)


async def to_dashboard(request: web.Request) -> web.Response:
    raise web.HTTPSeeOther("/admin/")


async def static_file(request: web.Request) -> web.FileResponse:
    """One of the dashboard's files (``static/``, its stylesheet and scripts), by name:
    only a file that is there, so no path leads out of it."""
    path = STATIC_FILES.get(request.match_info["name"])
    if path is None:
        raise web.HTTPNotFound()
    return web.FileResponse(path)


def _single_sign_on(
    admin: web.Application, state: AdminState, settings: OidcSettings, token: str
) -> None:
    """Single sign-on's relying party (PyJWT, ``parley[sso]``: imported only when
    ``admin.oidc`` is set), its HTTP client closed with the application."""
    from parley.admin.oidc import OidcClient
    from parley.admin.sso import Flows

    state.sso, state.flows = OidcClient(settings), Flows(token)

    async def close(_: web.Application) -> None:
        if state.sso is not None:
            await state.sso.close()

    admin.on_cleanup.append(close)


def admin_app(settings: Settings, edge: Edge) -> web.Application:
    """The admin surface as a sub-application, each route behind ``edge`` (the gateway's)
    and then the admin's own checks, which never run on /v1 calls."""
    admin = web.Application(client_max_size=settings.server.max_body_bytes)
    token = settings.admin.token
    if token:
        cookies = CookiePolicy(
            always=settings.admin.secure_cookies == "always",
            trusted_proxies=settings.admin.trusted_proxies,
        )
        state = AdminState(
            token, Sessions(token), cookies=cookies, local_sign_in=settings.admin.local_sign_in
        )
        if settings.admin.oidc is not None:
            _single_sign_on(admin, state, settings.admin.oidc, token)
        admin[ADMIN_STATE] = state
        admin[TEMPLATES] = Templates()  # Jinja2's environment, built by the first page
    routes = [
        web.route(method, path, deferred(f"parley.admin.{name}")) for method, path, name in HANDLERS
    ]
    routes += [web.get("", to_dashboard), web.get("/static/{name}", static_file)]

    def admin_edge(handler: Handler) -> Handler:
        return edge(checked(handler))

    admin.router.add_routes(behind(admin_edge, routes))
    admin.router.add_route("*", "", admin_edge(unrouted))  # /admin with another method
    catch_all(admin.router, admin_edge)
    return admin
