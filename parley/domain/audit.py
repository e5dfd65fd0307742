"""The admin audit log: who changed what, when, and from which address."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

ACTIONS = (
    ("group.create", "a group created"),
    ("group.update", "a group's rates, budget or models changed"),
    ("group.disable", "a group disabled"),
    ("group.enable", "a group enabled"),
    ("key.create", "a key created"),
    ("key.update", "a key's label, rates, budget, models or expiry changed"),
    ("key.rotate", "a key's secret rotated"),
    ("key.revoke", "a key revoked"),
    ("batch.cancel", "a batch cancelled by an operator"),
    ("realtime.talk", "a client secret made on the dashboard's talk page (its key, model)"),
    ("channel.create", "a channel added"),
    ("channel.update", "a channel changed"),
    ("channel.disable", "a channel disabled (by hand or by its health checks)"),
    ("channel.enable", "a channel enabled (by hand or by its health checks)"),
    ("channel.delete", "a channel deleted"),
    ("channel.test", "a channel tested"),
    ("channel.reseal", "the channels' keys sealed again"),
    ("model.create", "a model added"),
    ("model.update", "a model changed (a price scheduled among them)"),
    ("model.delete", "a model deleted"),
    ("account.create", "an administrator added"),
    ("account.update", "an administrator's role or password changed"),
    ("account.delete", "an administrator removed"),
    ("account.bind", "an administrator's account bound to a single sign-on"),
    ("session.login", "a sign-in"),
    ("session.logout", "a sign-out"),
    ("session.login_failed", "a failed sign-in"),
    ("session.locked_out", "an address locked out after failed sign-ins"),
    ("session.sso_refused", "a single sign-on refused (and why)"),
    ("voice.delete", "a cloned voice deleted"),
    ("content.view", "a call's kept content read (its request id)"),
    ("voice.deletion_retry", "a clone's deletion at its engine tried again now"),
    ("voice.deletion_abandon", "a clone's deletion at its engine given up"),
    ("alert.budget.group", "a group's budget threshold crossed"),
    ("alert.budget.key", "a key's budget threshold crossed"),
    ("alert.breaker.open", "a channel's breaker opened"),
    ("alert.channel.down", "a channel's health checks failing"),
    ("alert.usage.writer_behind", "the usage writer falling behind"),
    ("alert.refusals.spike", "refusals spiking"),
)
"""Every action the audit log records, with what it means: the audit page's filter
offers each (and each family, ``key.`` for every key action)."""


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
