"""Channels kept in the database (managed from the admin surface), and what happened to
them: breaker transitions, test calls and scheduled health checks, kept across
restarts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

EventKind = Literal["breaker", "test", "check"]


@dataclass(frozen=True, slots=True)
class StoredChannel:
    """A channel as stored: its settings but the credential (``spec``, the fields of
    ``ChannelSettings``), the credential sealed, and the last characters of it."""

    name: str
    spec: dict[str, Any]
    api_key_sealed: str | None
    key_hint: str | None
    disabled_at: datetime | None
    created_at: datetime
    updated_at: datetime
    id: int | None = None
    disabled_by: str | None = None
    """Who disabled it: an administrator's name, or ``health-check`` when the scheduled
    checks did (only then do passing checks enable it again)."""


@dataclass(frozen=True, slots=True)
class ChannelEvent:
    """A breaker transition or a test call's outcome (``state``: the breaker's new state,
    or ``ok``/``failed``); ``message`` is the upstream's error, redacted."""

    channel: str
    model: str
    kind: EventKind
    state: str
    message: str
    actor: str
    created_at: datetime
    status: int | None = None
    latency_ms: int | None = None
    id: int | None = None


def key_hint(secret: str) -> str:
    """What the operator may see of a credential: its last four characters, or nothing
    of a short one."""
    return f"…{secret[-4:]}" if len(secret) >= 12 else "…"
