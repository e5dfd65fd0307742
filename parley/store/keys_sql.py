"""Groups and keys, as queries on one open connection. ``SqlStore`` runs each as one unit
of work of its ``Database`` (a transaction for the writes)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, literal, or_, select

from parley.domain.content import ContentLogging
from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord
from parley.store.base import GroupChanges, KeyChanges, Missing, Replay
from parley.store.records import group, key, prefixes
from parley.store.schema import UtcDateTime, api_keys, groups

MAX_FORMER_PREFIXES = 100
"""The most replaced prefixes a key keeps (the newest): far more rotations than any key
sees, and a bound on what every directory refresh reads."""


def create_group(
    conn: Connection,
    name: str,
    *,
    quota: Quota,
    models: frozenset[str] | None,
    budget_nanos: int | None,
    now: datetime,
    content: ContentLogging = ContentLogging(),
) -> Group:
    values = {
        "name": name,
        "rpm": quota.rpm,
        "tpm": quota.tpm,
        "models": models_json(models),
        "budget_nanos": budget_nanos,
        "content_policy": content.policy,
        "content_retention_days": content.retention_days,
        "created_at": now,
        "updated_at": now,
    }
    result = conn.execute(groups.insert().values(values).returning(*groups.c))
    return group(result.mappings().one())


def update_group(conn: Connection, name: str, changes: GroupChanges, now: datetime) -> Group:
    values = _group_changes(changes) | {"updated_at": now}
    statement = groups.update().where(groups.c.name == name).values(values).returning(*groups.c)
    row = conn.execute(statement).mappings().one_or_none()
    if row is None:
        raise Missing(f"there is no group named `{name}`")
    return group(row)


def get_group(conn: Connection, name: str) -> Group | None:
    row = conn.execute(select(groups).where(groups.c.name == name)).mappings().one_or_none()
    return None if row is None else group(row)


def list_groups(conn: Connection) -> list[Group]:
    return [group(row) for row in conn.execute(select(groups).order_by(groups.c.id)).mappings()]


def create_key(conn: Connection, values: dict[str, Any]) -> KeyRecord:
    group_id = values["group_id"]
    if conn.execute(select(groups.c.id).where(groups.c.id == group_id)).first() is None:
        raise Missing(f"there is no group with id {group_id}")
    if values.get("idempotency_key") is not None:
        earlier = created_with(conn, values["idempotency_key"])
        if earlier is not None:
            raise Replay(earlier)
    result = conn.execute(api_keys.insert().values(values).returning(*api_keys.c))
    return key(result.mappings().one())


def created_with(conn: Connection, idempotency_key: str) -> KeyRecord | None:
    query = select(api_keys).where(api_keys.c.idempotency_key == idempotency_key)
    row = conn.execute(query).mappings().one_or_none()
    return None if row is None else key(row)


def find_key(conn: Connection, digest: str) -> KeyRecord | None:
    """The key whose secret, or whose secret replaced by a rotation, has this digest."""
    keys = api_keys.c
    query = select(api_keys).where(or_(keys.digest == digest, keys.previous_digest == digest))
    row = conn.execute(query.limit(1)).mappings().one_or_none()
    return None if row is None else key(row)


def update_key(conn: Connection, key_id: int, changes: KeyChanges, now: datetime) -> KeyRecord:
    values = _key_changes(changes) | {"updated_at": now}
    return _update_key(conn, key_id, values)


def rotate_key(
    conn: Connection, key_id: int, *, digest: str, prefix: str, until: datetime, now: datetime
) -> KeyRecord:
    """Give the key a new secret; the current one stays accepted until ``until``."""
    keys = api_keys.c
    query = select(keys.digest, keys.prefix, keys.former_prefixes).where(keys.id == key_id)
    current = conn.execute(query).first()
    if current is None:
        raise Missing(f"there is no key with id {key_id}")
    former = [current.prefix, *prefixes(current.former_prefixes)]
    values = {
        "digest": digest,
        "prefix": prefix,
        "former_prefixes": json.dumps(former[:MAX_FORMER_PREFIXES]),
        "previous_digest": current.digest,
        "previous_until": until,
        "updated_at": now,
    }
    return _update_key(conn, key_id, values)


def _update_key(conn: Connection, key_id: int, values: dict[str, Any]) -> KeyRecord:
    statement = (
        api_keys.update().where(api_keys.c.id == key_id).values(values).returning(*api_keys.c)
    )
    row = conn.execute(statement).mappings().one_or_none()
    if row is None:
        raise Missing(f"there is no key with id {key_id}")
    return key(row)


def list_keys(conn: Connection, group_id: int | None = None) -> list[KeyRecord]:
    query = select(api_keys).order_by(api_keys.c.id)
    if group_id is not None:
        query = query.where(api_keys.c.group_id == group_id)
    return [key(row) for row in conn.execute(query).mappings()]


def revoke_key(conn: Connection, key_id: int, at: datetime, now: datetime) -> KeyRecord:
    first_time = func.coalesce(api_keys.c.revoked_at, literal(at, UtcDateTime))
    statement = (
        api_keys.update()
        .where(api_keys.c.id == key_id)
        .values(revoked_at=first_time, updated_at=now)
        .returning(*api_keys.c)
    )
    row = conn.execute(statement).mappings().one_or_none()
    if row is None:
        raise Missing(f"there is no key with id {key_id}")
    return key(row)


def keys_changed_since(conn: Connection, since: datetime) -> list[KeyRecord]:
    query = select(api_keys).where(api_keys.c.updated_at >= since).order_by(api_keys.c.id)
    return [key(row) for row in conn.execute(query).mappings()]


def models_json(models: frozenset[str] | None) -> str | None:
    return None if models is None else json.dumps(sorted(models))


def _group_changes(changes: GroupChanges) -> dict[str, Any]:
    """Column values for the fields that change; a clear flag wins over a new value."""
    values: dict[str, Any] = {}
    for column, value, clear in (
        ("rpm", changes.rpm, changes.clear_rpm),
        ("tpm", changes.tpm, changes.clear_tpm),
        ("budget_nanos", changes.budget_nanos, changes.clear_budget),
        ("models", models_json(changes.models), changes.clear_models),
    ):
        if clear:
            values[column] = None
        elif value is not None:
            values[column] = value
    if changes.content_policy is not None:
        values["content_policy"] = changes.content_policy
    if changes.content_retention_days is not None:
        values["content_retention_days"] = changes.content_retention_days
    return values


def _key_changes(changes: KeyChanges) -> dict[str, Any]:
    """Column values for the key's fields that change; a clear flag wins over a value."""
    values: dict[str, Any] = {}
    if changes.name is not None:
        values["name"] = changes.name
    for column, value, clear in (
        ("rpm", changes.rpm, changes.clear_rpm),
        ("tpm", changes.tpm, changes.clear_tpm),
        ("budget_nanos", changes.budget_nanos, changes.clear_budget),
        ("models", models_json(changes.models), changes.clear_models),
        ("expires_at", changes.expires_at, changes.clear_expiry),
    ):
        if clear:
            values[column] = None
        elif value is not None:
            values[column] = value
    return values
