"""What the admin surface reads and writes beyond groups and keys, as queries on one
open connection: enabling and disabling groups, the operator's usage across groups,
failures per day, keys' last use, and the audit log. ``SqlStore`` delegates here.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from sqlalchemy import Connection, Date, Select, String, Table, cast, func, select, text
from sqlalchemy.sql.elements import ColumnElement

from parley.domain.audit import AuditEntry, AuditQuery
from parley.domain.groups import Group
from parley.domain.requests import StatusCounts
from parley.domain.usage import GroupDailyUsage
from parley.store.plain import ROLLUP_TOTALS, as_utc
from parley.store.records import group
from parley.store.schema import (
    FAILED_ONLY,
    api_keys,
    audit_log,
    groups,
    usage_daily,
    usage_daily_keys,
    usage_records,
)


def set_group_disabled(
    conn: Connection, name: str, at: datetime | None, now: datetime
) -> Group | None:
    """Disable (``at``) or enable (``None``) the named group; the group, or None."""
    statement = (
        groups.update()
        .where(groups.c.name == name)
        .values(disabled_at=at, updated_at=now)
        .returning(*groups.c)
    )
    row = conn.execute(statement).mappings().one_or_none()
    return None if row is None else group(row)


def usage_rollups(
    conn: Connection,
    start: date,
    end: date,
    *,
    group_id: int | None = None,
    model: str | None = None,
) -> list[GroupDailyUsage]:
    """Rollup rows of every group (or one) for ``start <= day < end``, by day, group, model."""
    keys = ("day", "group_id", "model")
    return _rollups(conn, usage_daily, keys, start, end, group_id=group_id, model=model)


def key_usage_rollups(
    conn: Connection,
    start: date,
    end: date,
    *,
    group_id: int | None = None,
    model: str | None = None,
) -> list[GroupDailyUsage]:
    """Per-key rollup rows for ``start <= day < end``, by day, group, key and model."""
    keys = ("day", "group_id", "key_id", "model")
    return _rollups(conn, usage_daily_keys, keys, start, end, group_id=group_id, model=model)


def _rollups(
    conn: Connection,
    table: Table,
    keys: tuple[str, ...],
    start: date,
    end: date,
    *,
    group_id: int | None,
    model: str | None,
) -> list[GroupDailyUsage]:
    """A rollup table's rows for ``start <= day < end`` (one group's, one model's if
    given): its ``keys`` columns and totals, ordered by ``keys``."""
    daily = table.c
    order = [daily[name] for name in keys]
    query = select(*order, *(daily[n] for n in ROLLUP_TOTALS))
    query = query.where(daily.day >= start, daily.day < end)
    if group_id is not None:
        query = query.where(daily.group_id == group_id)
    if model is not None:
        query = query.where(daily.model == model)
    query = query.order_by(*order)
    return [GroupDailyUsage(**row) for row in conn.execute(query).mappings()]


def _utc_day(conn: Connection, column: ColumnElement[datetime]) -> ColumnElement[Any]:
    """The UTC calendar day of a timestamp column, in the dialect's own words (SQLite
    keeps UTC text, whose ``date()`` is the day as 'YYYY-MM-DD')."""
    if conn.dialect.name == "postgresql":
        return cast(func.timezone("UTC", column), Date)
    return func.date(column, type_=String)


def failures_by_day(conn: Connection, since: datetime) -> dict[date, StatusCounts]:
    """Failed calls and refusals (status 400 or more: 4xx but 429, 429, 5xx) per UTC day,
    from the raw records since ``since``."""
    found: dict[date, list[int]] = {}
    for raw, status, count in conn.execute(failures_by_day_query(conn, since)):
        counts = found.setdefault(_as_date(raw), [0, 0, 0])
        counts[1 if status == 429 else 2 if status >= 500 else 0] += count
    return {at: StatusCounts(*counts) for at, counts in found.items()}


def failures_by_day_query(conn: Connection, since: datetime) -> Select[Any]:
    """Counts per day and status (a line counting several refusals counts them all),
    read through the partial index of failures (its condition in its own words, as
    SQLite needs to use it)."""
    records = usage_records.c
    day = _utc_day(conn, records.created_at).label("day")
    return (
        select(day, records.status, func.sum(records.request_count))
        .where(records.created_at >= since, text(f"usage_records.{FAILED_ONLY}"))
        .group_by(day, records.status)
    )


def _as_date(value: date | str) -> date:
    return value if isinstance(value, date) else date.fromisoformat(value)


def keys_last_used(conn: Connection, group_id: int | None = None) -> dict[int, datetime]:
    """Each used key's ``last_used_at`` (moved forward as the usage writer stores records)."""
    keys = api_keys.c
    query = select(keys.id, keys.last_used_at).where(keys.last_used_at.is_not(None))
    if group_id is not None:
        query = query.where(keys.group_id == group_id)
    return {key_id: as_utc(at) for key_id, at in conn.execute(query)}


def record_audit(conn: Connection, entry: AuditEntry) -> AuditEntry:
    values = {
        "created_at": entry.created_at,
        "actor": entry.actor,
        "address": entry.address,
        "action": entry.action,
        "target": entry.target,
        "detail": json.dumps(entry.detail, sort_keys=True),
    }
    result = conn.execute(audit_log.insert().values(values).returning(audit_log.c.id))
    return AuditEntry(**{**values, "detail": entry.detail, "id": result.scalar_one()})


def list_audit(
    conn: Connection,
    *,
    limit: int,
    before_id: int | None = None,
    query: AuditQuery | None = None,
) -> list[AuditEntry]:
    """The newest entries first that match ``query``; ``before_id`` pages back."""
    log = audit_log.c
    statement = select(audit_log).order_by(log.id.desc()).limit(limit)
    if before_id is not None:
        statement = statement.where(log.id < before_id)
    if query is not None:
        statement = statement.where(*_audit_conditions(query))
    rows = conn.execute(statement).mappings()
    return [AuditEntry(**{**row, "detail": json.loads(row["detail"])}) for row in rows]


def _audit_conditions(query: AuditQuery) -> list[ColumnElement[bool]]:
    log = audit_log.c
    conditions: list[ColumnElement[bool]] = []
    if query.actor:
        conditions.append(log.actor == query.actor)
    if query.action.endswith("."):
        conditions.append(log.action.startswith(query.action, autoescape=True))
    elif query.action:
        conditions.append(log.action == query.action)
    if query.target:
        conditions.append(func.lower(log.target).contains(query.target.lower(), autoescape=True))
    if query.since is not None:
        conditions.append(log.created_at >= query.since)
    if query.until is not None:
        conditions.append(log.created_at < query.until)
    return conditions
