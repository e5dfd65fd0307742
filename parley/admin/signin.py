"""Who is calling /admin, and whether their role allows the route.

* The admin token (``Authorization: Bearer``) acts as an owner: automation keeps it.
* An administrator account calls the API with HTTP Basic credentials (name and
  password) and the dashboard with a session made at sign-in. The account is read from
  the store on every admin request, so a role changed, an account disabled or deleted
  takes effect at once (the admin surface is never on the request path of ``/v1``).
* A password checked once is remembered for a minute (``passwords.VerifiedPasswords``),
  so API scripts with Basic credentials do not pay scrypt's cost on every call.
* With ``admin.local_sign_in: false`` the token and passwords are refused everywhere,
  and a dashboard session is kept only by an account bound to single sign-on
  (``sso.py``).
* Wrong credentials count against the client address and the account name
  (``FailedAttempts``); a request with none counts for nothing, and a right one is
  never refused. Each failure is written to the audit log (never the password) until
  its source is locked out; the lock-out is written once, and the wrong attempts during
  it are slowed down and refused with 429 (``wrong_credentials``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from datetime import UTC, datetime
from typing import cast

from aiohttp import web

from parley.admin.auth import bearer_token, token_matches
from parley.admin.context import ACTOR, ADMIN_STATE, ROLE, AdminState, client_address
from parley.admin.passwords import outdated
from parley.admin.roles import OPEN_ROUTES, needed
from parley.domain.accounts import ROLES, Account, Role, allows
from parley.domain.audit import Actor, AuditEntry
from parley.errors import AuthenticationFailed, PermissionDenied, RateLimited
from parley.pipeline.context import SERVICES
from parley.store.base import AccountStore

TOKEN_ROLE: Role = "owner"
DUMMY_HASH = "scrypt$17$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
"""Checked when the account is unknown or disabled, so that answer takes as long as a
wrong password's (an account's existence does not show in the timing)."""
ADMIN_PREFIX = "/admin"
LOCAL_OFF = (
    "Local sign-in is off (admin.local_sign_in: false): the admin token and passwords are "
    "refused; administrators sign in to the dashboard with single sign-on."
)


async def check_password(
    state: AdminState, store: AccountStore, name: str, password: str
) -> Account | None:
    """The enabled account ``name`` if ``password`` is its password, else None (an
    account made for single sign-on has none)."""
    account = await store.get_account(name) if len(name) <= 64 and name.isprintable() else None
    if account is None or account.disabled_at is not None or account.sso_only:
        await state.hasher.verify(password, DUMMY_HASH)  # the same time as a wrong password
        return None
    if state.verified.known(name, password, account.password_hash):
        return account
    if not await state.hasher.verify(password, account.password_hash):
        return None
    if outdated(account.password_hash):  # made with weaker parameters than today's
        hashed = await state.hasher.hash(password)
        account = await store.update_account(name, {"password_hash": hashed})
    state.verified.remember(name, password, account.password_hash)
    return account


def basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    if not authorization:
        return None
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    name, colon, password = decoded.partition(":")
    return (name, password) if colon and name else None


async def account_role(store: AccountStore, name: str, *, local: bool = True) -> Role | None:
    """The role of an enabled account (None when it is gone or disabled, or, with
    ``local`` sign-in off, when it is not bound to single sign-on)."""
    account = await store.get_account(name)
    if account is None or account.disabled_at is not None or account.role not in ROLES:
        return None
    if not local and account.sso_subject is None:
        return None
    return account.role


async def _audit(request: web.Request, who: str, action: str, target: str) -> None:
    """A sign-in event in the audit log, from the caller's address."""
    entry = AuditEntry(
        created_at=_now(),
        actor=who,
        address=client_address(request),
        action=action,
        target=target,
    )
    await request.config_dict[SERVICES].store.record_audit(entry)


async def wrong_credentials(
    request: web.Request, state: AdminState, who: str, how: str
) -> RateLimited | None:
    """Count a wrong credential (``who``: the account name tried, or ``token``) against
    the client address and the account name; audit it, or the lock-out it began; wait
    out the delay of a locked-out source. The 429 to answer instead of a 401, if any."""
    address = client_address(request)
    sources = [address] if who == "token" else [address, f"account:{who}"]
    failures = [state.attempts.failed(source) for source in sources]
    if not any(failure.locked_out for failure in failures):
        await _audit(request, who, "session.login_failed", how)
    for source, failure in zip(sources, failures, strict=True):
        if failure.began_lock_out:
            await _audit(request, who, "session.locked_out", source)
    delay = max(failure.delay for failure in failures)
    if delay:
        await asyncio.sleep(delay)
    return next((f.refusal for f in failures if f.refusal is not None), None)


async def api_identity(request: web.Request, state: AdminState) -> None:
    """Attach the API caller's actor and role, or raise ``AuthenticationFailed`` (or
    ``RateLimited`` for a wrong credential from a locked-out source)."""
    address = client_address(request)
    header = request.headers.get("Authorization")
    if not state.local_sign_in:
        raise AuthenticationFailed(LOCAL_OFF)
    if token_matches(bearer_token(header), state.token):
        request[ACTOR], request[ROLE] = Actor("token", address), TOKEN_ROLE
        return
    credentials = basic_credentials(header)
    if credentials is not None:
        name, password = credentials
        store = request.config_dict[SERVICES].store
        account = await check_password(state, store, name, password)
        if account is not None:
            state.attempts.succeeded(address)
            request[ACTOR], request[ROLE] = Actor(account.name, address), account.role
            return
    if header:  # a credential, and a wrong one; none at all counts for nothing
        who = credentials[0][:64] if credentials is not None else "token"
        refusal = await wrong_credentials(request, state, who, "api")
        if refusal is not None:
            raise refusal
    raise AuthenticationFailed(
        "A valid admin token ('Authorization: Bearer <token>') or an administrator's "
        "name and password (HTTP Basic) is required for /admin."
    )


def route_template(request: web.Request) -> str | None:
    """The matched route's path template under /admin (None when nothing matched)."""
    resource = request.match_info.route.resource
    if resource is None:
        return None
    return resource.canonical.removeprefix(ADMIN_PREFIX) or "/"


def require_role(request: web.Request) -> None:
    """Raise ``PermissionDenied`` unless the caller's role allows the matched route."""
    template = route_template(request)
    if (
        template is None
        or template.startswith("/static")
        or (request.method, template) in OPEN_ROUTES
    ):
        return
    wanted = needed(request.method, template)
    role = request.get(ROLE)
    if role not in ROLES or not allows(cast(Role, role), wanted):
        raise PermissionDenied(
            f"Your role ({role or 'none'}) may not do this; it needs the {wanted} role.",
            code="insufficient_role",
        )


def state_of(request: web.Request) -> AdminState:
    return request.config_dict[ADMIN_STATE]


def _now() -> datetime:
    return datetime.now(UTC)
