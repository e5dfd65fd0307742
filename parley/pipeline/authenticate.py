"""Stage 1: ``Authorization: Bearer <key>`` → the calling key and its group."""

from __future__ import annotations

from datetime import UTC, datetime

from parley.domain.groups import Group
from parley.domain.keys import KeyRecord, digest, looks_like_key, same_digest
from parley.domain.value import value
from parley.errors import AuthenticationFailed, PermissionDenied
from parley.runtime.directory import Directory

MISSING = (
    "You didn't provide an API key. You need to provide your API key in an "
    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)
WRONG = "Incorrect API key provided. Check the key, or ask your administrator for a new one."
REVOKED = "This API key has been revoked."
EXPIRED = "This API key has expired."
DISABLED = "This API key's group has been disabled. Ask your administrator to enable it."
ROTATED = "This API key has been replaced by a new one. Use the new key."


@value
class Caller:
    key: KeyRecord
    group: Group
    previous_secret: bool = False
    """The call came with the secret the key's last rotation replaced."""

    @property
    def prefix(self) -> str:
        """The display prefix of the secret the call came with."""
        return self.key.prefix_of(self.previous_secret)

    def may_use(self, model: str) -> bool:
        """Whether both the group and the key may use this public model name."""
        return self.group.may_use(model) and self.key.may_use(model)


async def authenticate(authorization: str | None, directory: Directory) -> Caller:
    caller = await identify(authorization, directory)
    check_usable(caller)
    return caller


async def identify(authorization: str | None, directory: Directory) -> Caller:
    """The key and group the header names, usable or not (401 when it names none)."""
    token = _bearer_token(authorization)
    wanted = digest(token)
    record = await directory.find_key(wanted)
    if record is None:
        raise AuthenticationFailed(WRONG)
    previous = record.previous_digest is not None and same_digest(record.previous_digest, wanted)
    if not previous and not same_digest(record.digest, wanted):
        raise AuthenticationFailed(WRONG)
    group = directory.group(record.group_id)
    if group is None:
        raise AuthenticationFailed(WRONG)
    return Caller(record, group, previous)  # key, group, previous_secret


def check_usable(caller: Caller) -> None:
    """Refuse a revoked or expired key, or a secret past its rotation's grace (401), and
    a disabled group (403). Apart from ``identify`` so that such a refusal still has its
    key for the request log."""
    record = caller.key
    now = datetime.now(UTC)
    if record.revoked_at is not None:
        raise AuthenticationFailed(REVOKED)
    if not record.usable_at(now):
        raise AuthenticationFailed(EXPIRED)
    if caller.previous_secret and not record.previous_valid_at(now):
        raise AuthenticationFailed(ROTATED)
    if caller.group.disabled_at is not None:
        raise PermissionDenied(DISABLED, code="group_disabled")


def _bearer_token(authorization: str | None) -> str:
    if not authorization:
        raise AuthenticationFailed(MISSING)
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise AuthenticationFailed(MISSING)
    if not looks_like_key(token):
        raise AuthenticationFailed(WRONG)
    return token
