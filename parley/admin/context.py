"""What the admin sub-application keeps, and how a handler gets its ``AdminService``."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from aiohttp import web

from parley.admin.auth import FailedAttempts, Session, Sessions
from parley.admin.passwords import Hasher, VerifiedPasswords
from parley.domain.accounts import GROUP_ADMIN
from parley.domain.audit import Actor
from parley.domain.groups import Group
from parley.errors import PermissionDenied
from parley.pipeline.context import SERVICES

if TYPE_CHECKING:
    from jinja2 import Environment

    from parley.admin.oidc import OidcClient
    from parley.admin.service import AdminService
    from parley.admin.sso import Flows


NOT_ADMITTED = "A group administrator reaches only its own group's pages."
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class CookiePolicy:
    """Whether the dashboard's cookies get ``Secure``: always, or when the request came
    over HTTPS, directly or through a trusted proxy whose ``X-Forwarded-Proto`` says
    ``https`` (a TLS-terminating proxy talks plain HTTP to Parley). The header is
    believed from the configured proxies only: anyone else could send it."""

    __slots__ = ("_always", "_proxies")

    def __init__(self, *, always: bool = False, trusted_proxies: Sequence[str] = ()) -> None:
        self._always = always
        self._proxies: tuple[Network, ...] = tuple(
            ipaddress.ip_network(proxy, strict=False) for proxy in trusted_proxies
        )

    def secure(self, request: web.Request) -> bool:
        if self._always or request.secure:
            return True
        forwarded = request.headers.get("X-Forwarded-Proto")
        if forwarded is None or not self._trusted(request.remote):
            return False
        return forwarded.split(",")[0].strip().lower() == "https"

    def _trusted(self, remote: str | None) -> bool:
        if remote is None or not self._proxies:
            return False
        try:
            address = ipaddress.ip_address(remote)
        except ValueError:  # a Unix socket's peer
            return False
        return any(address in network for network in self._proxies)


@dataclass
class AdminState:
    token: str
    sessions: Sessions
    attempts: FailedAttempts = field(default_factory=FailedAttempts)
    cookies: CookiePolicy = field(default_factory=CookiePolicy)
    hasher: Hasher = field(default_factory=Hasher)
    verified: VerifiedPasswords = field(default_factory=VerifiedPasswords)
    local_sign_in: bool = True
    """Whether the admin token and passwords sign in (``admin.local_sign_in``)."""
    sso: OidcClient | None = None
    """Single sign-on (``admin.oidc``), with the sign-ins under way (``flows``)."""
    flows: Flows | None = None


class Templates:
    """The dashboard's Jinja2 environment, built by the first page rendered: a gateway
    whose dashboard is never opened never loads Jinja2."""

    __slots__ = ("_environment",)

    def __init__(self) -> None:
        self._environment: Environment | None = None

    def environment(self, build: Callable[[], Environment]) -> Environment:
        if self._environment is None:
            self._environment = build()
        return self._environment


ADMIN_STATE = web.AppKey("admin_state", AdminState)
TEMPLATES = web.AppKey("admin_templates", Templates)
SESSION = web.RequestKey("admin_session", Session)
ACTOR = web.RequestKey("admin_actor", Actor)
ROLE = web.RequestKey("admin_role", str)
"""The caller's role (``parley.domain.accounts``): the token's is ``owner``."""
GROUP_SCOPE = web.RequestKey("admin_group_scope", Group)
"""A group-admin's group (``tenancy.py``): every view narrowed to it."""


def client_address(request: web.Request) -> str:
    """The peer's address (a proxy in front should be configured to pass a trusted one)."""
    return request.remote or "unknown"


def admin_service(request: web.Request) -> AdminService:
    """The caller's service: a group-admin's sees and changes its group alone. Its
    modules load with the first admin request, not in every worker."""
    from parley.admin.group_scope import GroupAdminService
    from parley.admin.service import AdminService
    from parley.api.voice_clones import retire

    svc = request.config_dict[SERVICES]
    scope = request.get(GROUP_SCOPE)
    if scope is None and request.get(ROLE) == GROUP_ADMIN:  # never all groups for them
        raise PermissionDenied(NOT_ADMITTED, code="insufficient_role")
    if scope is not None:
        return GroupAdminService(
            svc.store,
            request[ACTOR],
            scope,
            directory=svc.directory,
            ledger=svc.meter.ledger,
            unclone=partial(retire, svc),
        )
    return AdminService(
        svc.store,
        request[ACTOR],
        directory=svc.directory,
        ledger=svc.meter.ledger,
        unclone=partial(retire, svc),
        retry_deletion=svc.deletions.retry_now if svc.deletions is not None else None,
    )
