"""What the operator is shown of a key, a group and a budget.

A key's state (its record, never its secret, with its status and last use), a budget's
period and spend, and the settings of a key or group as the audit log and the API
record them. ``AdminService`` builds these; the API, the dashboard and the CLI show
them. They stand apart from the service because they are its answers' shapes, not its
actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from parley.domain.groups import Group
from parley.domain.keys import KeyRecord
from parley.domain.pricing import nanos_to_usd
from parley.runtime.budget import Period


@dataclass(frozen=True, slots=True)
class KeyState:
    """A key as the operator sees it: its record (never the secret), status and last use."""

    record: KeyRecord
    status: str
    """``active``, ``revoked``, ``expired``, or ``group_disabled`` (usable again when
    its group is enabled)."""
    last_used_at: datetime | None


@dataclass(frozen=True, slots=True)
class Budget:
    period: Period
    start: date
    end: date
    limit_nanos: int | None
    spent_nanos: int

    def view(self) -> dict[str, Any]:
        limit = self.limit_nanos
        return {
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
    }
