"""Realtime client secrets: short-lived ``ek_`` secrets a browser opens a realtime
session with, so that it never holds the group key itself.

A secret is made from a group key (``POST /v1/realtime/client_secrets``) and is bound to
that key (so to its group, its limits, and its revocation) and, when the request gave
one, to a session configuration and its model. Only its SHA-256 digest is kept, in
memory and in the database; it opens a realtime WebSocket until ``expires_at`` and is
accepted nowhere else (an ``ek_`` secret is no API key: every other call refuses it).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

PREFIX = "ek_"
"""OpenAI's prefix, which its SDKs read as "safe for a browser"."""


def new_client_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def looks_like_client_secret(token: str) -> bool:
    return token.startswith(PREFIX) and 20 <= len(token) <= 100 and token.isascii()


@dataclass(frozen=True, slots=True)
class ClientSecret:
    """A client secret as kept: its digest, whose key made it, and what it is bound to."""

    digest: str
    key_id: int
    group_id: int
    model: str | None
    """The public model the session must be of (``None``: any the key may use)."""
    session: dict[str, Any] | None
    """The session configuration sent upstream when the session opens."""
    created_at: datetime
    expires_at: datetime

    def usable_at(self, now: datetime) -> bool:
        return now < self.expires_at
