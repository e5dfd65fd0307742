"""Who a single sign-on is: the role its claim maps to (``admin.oidc.roles``) and the
administrator account it is bound to.

* The role is the highest one any value of the role claim maps to, at every sign-in: the
  provider is where a role is given or taken away. No mapped value: no sign-in.
* An account is bound to ``<issuer> <sub>`` (``Account.sso_subject``), which the
  provider never gives to anyone else, so a sign-in finds its account by who the
  provider says it is, never by a name. The first sign-in binds the account named by
  the name claim if an owner made it for single sign-on (no password) and it is bound
  to no one yet, or creates it where ``create_accounts`` allows. An account with a
  password of the same name is never taken over: the sign-in is refused.
* A sign-in under way is a signed cookie (``Flows``): any worker can finish it, and each
  answer is accepted once in a process.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer

from parley.admin.accounts import RESERVED
from parley.admin.oidc import Flow, OidcRefused
from parley.domain.accounts import ACCOUNT_NAME, ROLES, Account, Role
from parley.runtime_settings import OidcSettings
from parley.store.base import AccountStore, Conflict

Audit = Callable[..., Awaitable[None]]
"""``audit(action, target, **detail)`` under the account signing in."""
NOT_NAME = re.compile(r"[^a-z0-9._-]+")
FLOW_SECONDS = 600
"""How long a sign-in may stay at the provider."""


def claim_values(claims: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """The string values at a dotted claim path (a string, or a list of strings)."""
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(item for item in value if isinstance(item, str))
    return ()


def mapped_role(claims: Mapping[str, Any], settings: OidcSettings) -> Role | None:
    """The highest role any value of the role claim maps to (None: no mapping)."""
    found = [
        settings.roles[v] for v in claim_values(claims, settings.role_claim) if v in settings.roles
    ]
    return max(found, key=ROLES.index) if found else None


def account_name(claims: Mapping[str, Any], settings: OidcSettings) -> str | None:
    """The name claim as an account name (lower-case, other characters as '-')."""
    values = claim_values(claims, settings.username_claim)
    if not values:
        return None
    name = NOT_NAME.sub("-", values[0].strip().lower()).lstrip("._-")[:64]
    return name if ACCOUNT_NAME.fullmatch(name) and name not in RESERVED else None


def subject_of(claims: Mapping[str, Any]) -> str:
    return f"{claims['iss']} {claims['sub']}"


async def bind_account(
    store: AccountStore,
    settings: OidcSettings,
    claims: Mapping[str, Any],
    role: Role,
    audit: Callable[[str], Audit],
) -> Account:
    """The enabled account of this sign-in, with the mapped role; ``audit(name)`` is
    how changes are written under the account's name. Raises ``OidcRefused``."""
    account = await store.account_of_subject(subject_of(claims))
    if account is None:
        account = await _first_sign_in(store, settings, claims, role, audit)
    if account.disabled_at is not None:
        raise OidcRefused(f"The account '{account.name}' is disabled.")
    if account.role != role:
        account = await store.update_account(account.name, {"role": role})
        await audit(account.name)("account.update", account.name, role=role, via="sso")
    return account


async def _first_sign_in(
    store: AccountStore,
    settings: OidcSettings,
    claims: Mapping[str, Any],
    role: Role,
    audit: Callable[[str], Audit],
) -> Account:
    name = account_name(claims, settings)
    if name is None:
        raise OidcRefused(
            f"The provider's answer has no '{settings.username_claim}' claim that makes an "
            "account name."
        )
    subject = subject_of(claims)
    existing = await store.get_account(name)
    if existing is not None:
        if not existing.sso_only or existing.sso_subject is not None:
            raise OidcRefused(
                f"An account named '{name}' exists here and is not bound to this sign-in."
            )
        account = await store.update_account(name, {"sso_subject": subject})
        await audit(name)("account.bind", name, via="sso")
        return account
    if not settings.create_accounts:
        raise OidcRefused(
            f"There is no account '{name}' for single sign-on here, and accounts are not "
            "created at the first sign-in; an owner can make one."
        )
    now = datetime.now(UTC)
    try:
        account = await store.add_account(Account(name, role, "", now, now, sso_subject=subject))
    except Conflict:
        raise OidcRefused(f"An account named '{name}' was made at the same time.") from None
    await audit(name)("account.create", name, role=role, via="sso")
    return account


class Flows:
    """Sign-ins under way, each in a short-lived cookie signed with a key derived from
    the admin token (so any worker can finish one another began), and the states
    already answered in this process, so a replayed answer is refused."""

    def __init__(self, token: str, max_age: int = FLOW_SECONDS) -> None:
        key = hmac.new(token.encode("utf-8"), b"parley admin sso", hashlib.sha256).digest()
        self._serializer = URLSafeTimedSerializer(key, salt="parley.admin.sso")
        self.max_age = max_age
        self._answered: OrderedDict[str, float] = OrderedDict()

    def seal(self, flow: Flow) -> str:
        return self._serializer.dumps([flow.state, flow.nonce, flow.verifier])

    def answer(self, cookie: str | None, state: str | None) -> Flow:
        """The flow of the cookie if ``state`` is its state and was never answered."""
        try:
            data = self._serializer.loads(cookie or "", max_age=self.max_age)
        except BadSignature:  # also SignatureExpired
            raise OidcRefused(
                "This sign-in did not start here, or it took too long; start it again."
            ) from None
        if not (
            isinstance(data, list) and len(data) == 3 and all(isinstance(d, str) for d in data)
        ):
            raise OidcRefused("This sign-in did not start here; start it again.")
        flow = Flow(*data)
        if not isinstance(state, str) or not hmac.compare_digest(
            state.encode(), flow.state.encode()
        ):
            raise OidcRefused("The provider's answer is not this sign-in's (state).")
        now = time.monotonic()
        while self._answered and next(iter(self._answered.values())) < now - self.max_age:
            self._answered.popitem(last=False)
        if flow.state in self._answered:
            raise OidcRefused("This sign-in was answered already (a replayed answer).")
        self._answered[flow.state] = now
        return flow


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))
