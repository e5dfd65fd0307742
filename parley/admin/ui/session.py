"""Signing in and out of the dashboard, and the gate every dashboard request passes.

The login form is protected from cross-site posting by a double-submit token (a random
value in a SameSite=Strict cookie and in the form); every form after login carries the
session's CSRF token, checked here before any handler runs.
"""

from __future__ import annotations

import secrets

from aiohttp import web

from parley.admin.auth import same_secret, token_matches
from parley.admin.context import ACTOR, ADMIN_STATE, ROLE, SESSION, client_address
from parley.admin.service import AdminService
from parley.admin.signin import (
    LOCAL_OFF,
    TOKEN_ROLE,
    account_role,
    check_password,
    wrong_credentials,
)
from parley.admin.ui.render import page
from parley.domain.audit import Actor
from parley.errors import PermissionDenied
from parley.pipeline.context import SERVICES
from parley.store.base import AccountStore

SESSION_COOKIE = "parley_admin"
LOGIN_COOKIE = "parley_login"
COOKIE_PATH = "/admin"
OPEN_PATHS = ("/admin/login", "/admin/static/", "/admin/sso/")
NOT_TOKEN = "That is not the admin token (leave the name empty to sign in with it)."
FORGED = (
    "This form did not come from this dashboard, or it has expired. Reload the page and try again."
)


def set_cookie(
    request: web.Request,
    response: web.StreamResponse,
    name: str,
    value: str,
    max_age: int,
    *,
    path: str = COOKIE_PATH,
    samesite: str = "Strict",
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path,
        httponly=True,
        samesite=samesite,
        secure=request.config_dict[ADMIN_STATE].cookies.secure(request),
    )


async def enter(request: web.Request) -> None:
    """Attach the session (or redirect to the login page) and check the CSRF token."""
    if request.path.startswith(OPEN_PATHS):
        return
    state = request.config_dict[ADMIN_STATE]
    session = state.sessions.read(request.cookies.get(SESSION_COOKIE))
    if session is None:
        raise web.HTTPSeeOther("/admin/login")
    local = state.local_sign_in
    if session.who == "token":
        role = TOKEN_ROLE if local else None
    else:
        role = await account_role(_accounts(request), session.who, local=local)
    if role is None:  # the account was disabled or deleted since
        raise web.HTTPSeeOther("/admin/login")
    request[SESSION] = session
    request[ACTOR] = Actor(session.actor, client_address(request))
    request[ROLE] = role
    if request.method == "POST":
        form = await request.post()
        given = form.get("csrf")
        if not isinstance(given, str) or not same_secret(given, session.csrf):
            raise PermissionDenied(FORGED, code="csrf_failed")


async def login_form(request: web.Request, *, error: str = "", status: int = 200) -> web.Response:
    state = request.config_dict[ADMIN_STATE]
    nonce = secrets.token_urlsafe(24)
    context = {
        "nonce": nonce,
        "error": error,
        "local": state.local_sign_in,
        "provider": state.sso.settings.name if state.sso is not None else None,
    }
    response = page(request, "login.html", context, status=status)
    set_cookie(request, response, LOGIN_COOKIE, nonce, 3600)
    return response


async def login_page(request: web.Request) -> web.Response:
    return await login_form(request)


async def login(request: web.Request) -> web.Response:
    state = request.config_dict[ADMIN_STATE]
    address = client_address(request)
    if not state.local_sign_in:
        return await login_form(request, error=LOCAL_OFF, status=403)
    form = await request.post()
    nonce, cookie = form.get("nonce"), request.cookies.get(LOGIN_COOKIE, "")
    if not isinstance(nonce, str) or not cookie or not same_secret(nonce, cookie):
        return await login_form(request, error=FORGED, status=403)
    given, account = form.get("token"), form.get("account")
    password = given if isinstance(given, str) else ""
    name = account.strip() if isinstance(account, str) else ""
    if name:
        found = await check_password(state, _accounts(request), name, password)
        who = found.name if found is not None else None
    else:
        who = "token" if token_matches(password, state.token) else None
    if who is None:
        wrong = "That name and password do not match an account." if name else NOT_TOKEN
        if not name and not password:  # no credential at all counts for nothing
            return await login_form(request, error=wrong, status=401)
        refusal = await wrong_credentials(request, state, name[:64] or "token", "dashboard")
        if refusal is not None:
            return await login_form(request, error=refusal.message, status=429)
        return await login_form(request, error=wrong, status=401)
    state.attempts.succeeded(address)
    session, cookie_value = state.sessions.new(who)
    await _audit(request, Actor(session.actor, address), "session.login")
    response = web.HTTPSeeOther("/admin/")
    set_cookie(request, response, SESSION_COOKIE, cookie_value, state.sessions.max_age)
    response.del_cookie(LOGIN_COOKIE, path=COOKIE_PATH)
    raise response


async def logout(request: web.Request) -> web.Response:
    request.config_dict[ADMIN_STATE].sessions.end(request[SESSION])
    await _audit(request, request[ACTOR], "session.logout")
    response = web.HTTPSeeOther("/admin/login")
    response.del_cookie(SESSION_COOKIE, path=COOKIE_PATH)
    raise response


def _accounts(request: web.Request) -> AccountStore:
    accounts: AccountStore = request.config_dict[SERVICES].store
    return accounts


async def _audit(request: web.Request, actor: Actor, action: str) -> None:
    store = request.config_dict[SERVICES].store
    await AdminService(store, actor).audit(action, "dashboard")
