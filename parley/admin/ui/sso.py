"""Signing in to the dashboard through the OpenID Connect provider (``admin.oidc``).

``/admin/sso/start`` keeps a new sign-in (``state``, ``nonce``, PKCE verifier) in a
signed cookie and sends the browser to the provider; ``/admin/sso/callback`` takes the
provider's answer, checks it (``sso.Flows``: this browser's sign-in, answered once),
exchanges the code, verifies the ID token (``oidc.py``), maps the role and binds the
account (``sso.py``), then opens a dashboard session as a password sign-in does.

The sign-in cookie is ``SameSite=Lax``: the provider's answer is a top-level navigation
from another site, which a ``Strict`` cookie would miss. The session cookie stays
``Strict``, so the callback answers with a page that moves on to the dashboard itself
(a navigation from this site, which carries it), not with a redirect. Every sign-in and
every refusal is audited (``session.login`` with ``method: sso``,
``session.sso_refused`` with the reason) until the address is locked out for refusals.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from parley.admin.context import ADMIN_STATE, AdminState, client_address
from parley.admin.oidc import Flow, OidcRefused
from parley.admin.service import AdminService
from parley.admin.sso import Audit, bind_account, mapped_role
from parley.admin.ui.render import page
from parley.admin.ui.session import COOKIE_PATH, SESSION_COOKIE, set_cookie
from parley.domain.audit import Actor
from parley.pipeline.context import SERVICES

FLOW_COOKIE = "parley_sso"
FLOW_PATH = "/admin/sso"
OFF = "Single sign-on is not set up on this gateway (admin.oidc)."
log = logging.getLogger("parley.admin")


def _client(request: web.Request) -> AdminState:
    state: AdminState = request.config_dict[ADMIN_STATE]
    if state.sso is None or state.flows is None:
        raise web.HTTPNotFound(text=OFF)
    return state


async def start(request: web.Request) -> web.StreamResponse:
    state = _client(request)
    assert state.sso is not None and state.flows is not None
    flow = Flow.new()
    try:
        target = await state.sso.authorization_url(flow)
    except OidcRefused as refused:
        log.warning("single sign-on cannot start: %s", refused.reason)
        return _refusal(request, refused.reason, status=502)
    response = web.HTTPSeeOther(target)
    set_cookie(
        request,
        response,
        FLOW_COOKIE,
        state.flows.seal(flow),
        state.flows.max_age,
        path=FLOW_PATH,
        samesite="Lax",
    )
    raise response


async def callback(request: web.Request) -> web.StreamResponse:
    state = _client(request)
    assert state.sso is not None and state.flows is not None
    who = ""
    try:
        flow = state.flows.answer(request.cookies.get(FLOW_COOKIE), request.query.get("state"))
        issuer = request.query.get("iss")  # RFC 9207: which provider answered
        if issuer is not None and issuer != state.sso.settings.issuer:
            raise OidcRefused("The answer comes from another provider (iss).")
        error = request.query.get("error")
        if error is not None:
            described = request.query.get("error_description", "")[:200]
            raise OidcRefused(f"The provider refused the sign-in: {error[:60]} {described}".strip())
        code = request.query.get("code")
        if not code:
            raise OidcRefused("The provider's answer has no code.")
        claims = await state.sso.sign_in(code, flow)
        who = _who(claims, state)
        role = mapped_role(claims, state.sso.settings)
        if role is None:
            raise OidcRefused(
                f"Your account at {state.sso.settings.name} has no "
                f"'{state.sso.settings.role_claim}' value that gives a role here."
            )
        store = request.config_dict[SERVICES].store
        account = await bind_account(
            store, state.sso.settings, claims, role, lambda name: _auditor(request, name)
        )
    except OidcRefused as refused:
        await _refused(request, state, who, refused.reason)
        return _refusal(request, refused.reason, status=403)
    state.attempts.succeeded(client_address(request))
    _, cookie = state.sessions.new(account.name)
    await _auditor(request, account.name)("session.login", "dashboard", method="sso", role=role)
    response = page(request, "sso_done.html", {})
    set_cookie(request, response, SESSION_COOKIE, cookie, state.sessions.max_age, path=COOKIE_PATH)
    response.del_cookie(FLOW_COOKIE, path=FLOW_PATH)
    return response


def _who(claims: dict[str, Any], state: AdminState) -> str:
    """Who the provider says signed in, for the audit log of a refusal."""
    assert state.sso is not None
    name = claims.get(state.sso.settings.username_claim)
    return (name if isinstance(name, str) and name.isprintable() else str(claims["sub"]))[:64]


def _auditor(request: web.Request, name: str) -> Audit:
    actor = Actor(name, client_address(request))
    return AdminService(request.config_dict[SERVICES].store, actor).audit


async def _refused(request: web.Request, state: AdminState, who: str, reason: str) -> None:
    """Audit a refusal, counted against the address like a wrong password, until the
    address is locked out (a flood of refusals fills no audit log)."""
    failure = state.attempts.failed(client_address(request))
    if not failure.locked_out:
        await _auditor(request, who or "sso")("session.sso_refused", "dashboard", reason=reason)


def _refusal(request: web.Request, reason: str, *, status: int) -> web.Response:
    sso = request.config_dict[ADMIN_STATE].sso
    provider = sso.settings.name if sso is not None else "single sign-on"
    response = page(
        request, "sso_refused.html", {"reason": reason, "provider": provider}, status=status
    )
    response.del_cookie(FLOW_COOKIE, path=FLOW_PATH)
    return response
