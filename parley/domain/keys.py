"""API keys: generation, digests and the stored record.

A key is ``pk-`` followed by 43 URL-safe characters (256 random bits). Only its SHA-256
digest and a short display prefix are ever stored.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

from parley.domain.groups import Quota

KEY_PREFIX = "pk-"
DISPLAY_CHARS = 10


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def display_prefix(key: str) -> str:
    return key[:DISPLAY_CHARS]


def same_digest(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("ascii"), b.encode("ascii"))


def looks_like_key(token: str) -> bool:
    return 16 <= len(token) <= 256 and token.isascii() and token.isprintable() and " " not in token


@dataclass(frozen=True, slots=True)
class KeyRecord:
    id: int
    group_id: int
    name: str
    digest: str
    prefix: str
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    quota: Quota = Quota()
    """Per-key overrides of the group's rates; ``None`` fields inherit the group's."""
    models: frozenset[str] | None = None
    """Public model names this key may use, within the group's; ``None``: the group's."""
    budget_nanos: int | None = None
    """The key's own spend limit per budget period, on top of the group's; ``None``: none."""
    previous_digest: str | None = None
    """The digest of the secret a rotation replaced, accepted until ``previous_until``."""
    previous_until: datetime | None = None
    former_prefixes: tuple[str, ...] = ()
    """The display prefixes of the secrets rotations replaced, newest first: the first is
    the previous secret's while ``previous_digest`` is kept. The request log names a call
    by the prefix of the secret that made it, and a search for an old prefix finds the key."""

    def usable_at(self, now: datetime) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or now < self.expires_at

    def may_use(self, model: str) -> bool:
        return self.models is None or model in self.models

    def prefix_of(self, previous: bool) -> str:
        """The display prefix of the current secret, or of the previous one (empty when
        its rotation predates the record of former prefixes)."""
        if not previous:
            return self.prefix
        return self.former_prefixes[0] if self.former_prefixes else ""

    def known_by(self, prefix: str) -> bool:
        """Whether ``prefix`` is, or starts, the prefix of this key's secret now or of one
        a rotation replaced (case-insensitive, as the dashboard's search is)."""
        wanted = prefix.casefold()
        return any(
            known.casefold().startswith(wanted) for known in (self.prefix, *self.former_prefixes)
        )

    def previous_valid_at(self, now: datetime) -> bool:
        """Whether the secret replaced by the last rotation is still in its grace period."""
        return self.previous_until is not None and now < self.previous_until
