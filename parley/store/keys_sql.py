"""Groups and keys, as queries on one open connection. ``SqlStore`` runs each as one unit
of work of its ``Database`` (a transaction for the writes)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, func, literal, select

from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord
from parley.store.base import GroupChanges, Missing
from parley.store.rows import record
from parley.store.schema import UtcDateTime, api_keys, groups


def create_group(
    conn: Connection,
    name: str,
    *,
    quota: Quota,
    models: frozenset[str] | None,
    budget_nanos: int | None,
    now: datetime,
) -> Group:
    values = {
        "name": name,
        "rpm": quota.rpm,
        "tpm": quota.tpm,
        "models": _models_json(models),
        "budget_nanos": budget_nanos,
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
    result = conn.execute(api_keys.insert().values(values).returning(*api_keys.c))
    return key(result.mappings().one())


def find_key(conn: Connection, digest: str) -> KeyRecord | None:
    query = select(api_keys).where(api_keys.c.digest == digest)
    row = conn.execute(query).mappings().one_or_none()
    return None if row is None else key(row)


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


def _models_json(models: frozenset[str] | None) -> str | None:
    return None if models is None else json.dumps(sorted(models))


def _group_changes(changes: GroupChanges) -> dict[str, Any]:
    """Column values for the fields that change; a clear flag wins over a new value."""
    values: dict[str, Any] = {}
    for column, value, clear in (
        ("rpm", changes.rpm, changes.clear_rpm),
        ("tpm", changes.tpm, changes.clear_tpm),
        ("budget_nanos", changes.budget_nanos, changes.clear_budget),
        ("models", _models_json(changes.models), changes.clear_models),
    ):
        if clear:
            values[column] = None
        elif value is not None:
            values[column] = value
    return values


def group(row: RowMapping) -> Group:
    models = row["models"]
    return record(
        Group,
        row,
        quota=Quota(rpm=row["rpm"], tpm=row["tpm"]),
        models=None if models is None else frozenset(json.loads(models)),
    )


def key(row: RowMapping) -> KeyRecord:
    return record(KeyRecord, row, quota=Quota(rpm=row["rpm"], tpm=row["tpm"]))
