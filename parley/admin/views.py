"""What the operator is shown of groups, keys, budgets, audit entries, clones and the
clone deletions still to do on the engines.

A key's state (its record, never its secret, with its status and last use) and a
budget's period and spend are what ``AdminService`` answers with, and the dashboard and
the CLI show; the ``*_view`` functions and ``Budget.view`` are the JSON shapes the admin
API sends, and ``key_detail`` and ``group_detail`` the settings of a key or group as the
audit log and the API record them. A key shows only its prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from parley.domain.audit import AuditEntry
from parley.domain.groups import Group
from parley.domain.keys import KeyRecord
from parley.domain.pricing import nanos_to_usd
from parley.domain.voices import Clone, PendingDeletion
from parley.runtime.budget import Period


@dataclass(frozen=True, slots=True)
class KeyState:
    """A key as the operator sees it: its record (never the secret), status and last use."""

    record: KeyRecord
    status: str
    """``active``, ``revoked``, ``expired``, or ``group_disabled`` (usable again when
    its group is enabled)."""
    last_used_at: datetime | None


NEAR_BUDGET = 0.8
"""The part of a budget spent from which the dashboard says a group or key is near it."""


@dataclass(frozen=True, slots=True)
class Budget:
    period: Period
    start: date
    end: date
    limit_nanos: int | None
    spent_nanos: int

    @property
    def over(self) -> bool:
        """Spent all of it: calls are refused (429 ``insufficient_quota``) until the
        period ends or the budget is raised."""
        return self.limit_nanos is not None and self.spent_nanos >= self.limit_nanos

    @property
    def share(self) -> float | None:
        """The part spent (1.0 is all of it, and past it above); None with no budget."""
        limit = self.limit_nanos
        if limit is None:
            return None
        return self.spent_nanos / limit if limit else 1.0

    @property
    def state(self) -> str:
        """``over`` (spent), ``near`` (``NEAR_BUDGET`` of it or more), ``ok``, or ``none``
        (no budget): what the dashboard flags, in colour and in words."""
        share = self.share
        if share is None:
            return "none"
        if self.over:
            return "over"
        return "near" if share >= NEAR_BUDGET else "ok"

    def view(self) -> dict[str, Any]:
        limit = self.limit_nanos
        return {
            "state": self.state,
            "period": self.period,
            "period_start": self.start.isoformat(),
            "period_end": self.end.isoformat(),
            "limit_usd": nanos_to_usd(limit) if limit is not None else None,
            "spent_usd": nanos_to_usd(self.spent_nanos),
            "remaining_usd": nanos_to_usd(max(0, limit - self.spent_nanos))
            if limit is not None
            else None,
        }


def key_status(record: KeyRecord, now: datetime, group: Group | None = None) -> str:
    if record.revoked_at is not None:
        return "revoked"
    if not record.usable_at(now):
        return "expired"
    return "group_disabled" if group is not None and group.disabled_at else "active"


def key_name(record: KeyRecord) -> str:
    """How reports name a key: its prefix, and its label when it has one."""
    return f"{record.prefix}… {record.name}".rstrip()


def key_detail(record: KeyRecord) -> dict[str, Any]:
    """A key's settings as the audit log and the API show them (never its secret)."""
    return {
        "name": record.name,
        "rpm": record.quota.rpm,
        "tpm": record.quota.tpm,
        "models": sorted(record.models) if record.models is not None else None,
        "budget_usd": nanos_to_usd(record.budget_nanos)
        if record.budget_nanos is not None
        else None,
        "expires_at": record.expires_at.isoformat() if record.expires_at else None,
    }


def group_detail(group: Group) -> dict[str, Any]:
    """A group's settings as the audit log and the API show them."""
    return {
        "rpm": group.quota.rpm,
        "tpm": group.quota.tpm,
        "models": sorted(group.models) if group.models is not None else None,
        "budget_usd": nanos_to_usd(group.budget_nanos) if group.budget_nanos is not None else None,
        "content_policy": group.content.policy,
        "content_retention_days": group.content.retention_days,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def group_view(group: Group) -> dict[str, Any]:
    return {
        "id": group.id,
        "name": group.name,
        **group_detail(group),
        "disabled": group.disabled_at is not None,
        "disabled_at": _iso(group.disabled_at),
        "created_at": _iso(group.created_at),
    }


def key_view(state: KeyState, group_names: Mapping[int, str]) -> dict[str, Any]:
    record = state.record
    return {
        "id": record.id,
        "group_id": record.group_id,
        "group": group_names.get(record.group_id),
        "name": record.name,
        "prefix": record.prefix,
        "status": state.status,
        "created_at": _iso(record.created_at),
        "expires_at": _iso(record.expires_at),
        "revoked_at": _iso(record.revoked_at),
        "last_used_at": _iso(state.last_used_at),
        **key_detail(record),
        "former_prefixes": list(record.former_prefixes),
        "previous_secret_valid_until": _iso(record.previous_until)
        if record.previous_until is not None and record.previous_until > datetime.now(UTC)
        else None,
    }


def audit_view(entry: AuditEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "created_at": _iso(entry.created_at),
        "actor": entry.actor,
        "address": entry.address,
        "action": entry.action,
        "target": entry.target,
        "detail": entry.detail,
    }


def clone_view(clone: Clone, group_names: Mapping[int, str]) -> dict[str, Any]:
    """A registered clone as the operator sees it (the engine's name and channel too)."""
    return {
        "object": "audio.voice",
        "id": clone.voice_id,
        "model": clone.model,
        "group_id": clone.group_id,
        "group": group_names.get(clone.group_id),
        "label": clone.label,
        "engine_name": clone.engine_name,
        "channel": clone.channel,
        "duration_seconds": round(clone.duration_ms / 1000, 3),
        "consent": clone.consent,
        "created_at": _iso(clone.created_at),
    }


def deletion_view(pending: PendingDeletion, group_names: Mapping[int, str]) -> dict[str, Any]:
    """A clone deletion still to do on its engine: what, where, and how it went so far
    (``last_error`` holds no credential: it was redacted before it was stored)."""
    return {
        "object": "audio.voice.deletion",
        "id": pending.id,
        "voice_id": pending.voice_id,
        "model": pending.model,
        "group_id": pending.group_id,
        "group": group_names.get(pending.group_id),
        "label": pending.label,
        "engine_name": pending.engine_name,
        "channel": pending.channel,
        "requested_at": _iso(pending.requested_at),
        "attempts": pending.attempts,
        "last_error": pending.last_error,
        "last_attempt_at": _iso(pending.last_attempt_at),
        "next_attempt_at": _iso(pending.next_attempt_at),
    }
