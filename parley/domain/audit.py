"""The admin audit log: who changed what, when, and from which address."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts on the admin surface: ``token`` (the API), ``session:<id>`` (the
    dashboard) or ``cli``, and the client address (``local`` for the CLI)."""

    who: str
    address: str


@dataclass(frozen=True, slots=True)
class AuditEntry:
    created_at: datetime
    actor: str
    address: str
    action: str
    """``group.create``, ``group.update``, ``group.disable``, ``key.create``…"""
    target: str
    """What it acted on (a group name, a key id and prefix); never a secret."""
    detail: dict[str, Any] = field(default_factory=dict)
    id: int | None = None


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which entries to read: empty strings and ``None`` match everything."""

    actor: str = ""
    """The actor exactly."""
    action: str = ""
    """The action exactly, or every action under a prefix that ends in '.'."""
    target: str = ""
    """A part of the target, in any case."""
    since: datetime | None = None
    until: datetime | None = None
    """Excluded."""
