"""The JSON shapes of admin objects (never a secret: keys show only their prefix)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from parley.admin.described import KeyState, group_detail, key_detail
from parley.domain.audit import AuditEntry
from parley.domain.groups import Group
from parley.domain.voices import Clone


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
