"""Usage records and their daily rollups, as queries on one open connection.

``record_usage`` writes the raw records and the rollups in the caller's transaction:
``INSERT ... ON CONFLICT DO NOTHING RETURNING request_id`` says which records were new
(atomically, also against another process writing the same ids), and only those of
admitted calls (not refusals, which are request-log lines) are added to ``usage_daily``
with ``INSERT ... ON CONFLICT DO UPDATE SET x = usage_daily.x + excluded.x``. Rows are
written in sorted order so that concurrent writers take their row locks in the same order
and cannot deadlock each other on PostgreSQL. A SQLite file and PostgreSQL write usage
with writers of their own (``usage_sqlite.py``, ``usage_postgres.py``) to the same rules;
this one writes a memory database's, and is what the contract tests hold them to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Table, bindparam, delete, func, or_, select, update
from sqlalchemy.dialects import sqlite

from parley.domain.usage import DailyUsage, UsageRecord
from parley.store.plain import ROLLUP_TOTALS, as_utc
from parley.store.schema import api_keys, usage_daily, usage_daily_keys, usage_records

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql

RollupKey = tuple[int, date, str]


def record_usage(conn: Connection, records: Sequence[UsageRecord]) -> int:
    """Insert the records not stored yet and add them to the rollups; returns how many."""
    unique = _first_of_each(records)
    if not unique:
        return 0
    new_ids = _insert_new(conn, unique.values())
    fresh = [record for request_id, record in unique.items() if request_id in new_ids]
    if fresh:
        calls = [record for record in fresh if record.admitted]  # refusals: the log only
        if calls:
            _add_to_rollups(conn, calls)
            _add_to_key_rollups(conn, calls)
        _stamp_last_use(conn, fresh)
    return len(fresh)


def daily_usage(conn: Connection, group_id: int, start: date, end: date) -> list[DailyUsage]:
    daily = usage_daily.c
    query = (
        select(daily.day, daily.model, *(daily[name] for name in ROLLUP_TOTALS))
        .where(daily.group_id == group_id, daily.day >= start, daily.day < end)
        .order_by(daily.day, daily.model)
    )
    rows = conn.execute(query).mappings()
    return [DailyUsage(**row) for row in rows]


def spend_since(conn: Connection, day: date) -> dict[int, int]:
    daily = usage_daily.c
    query = (
        select(daily.group_id, func.sum(daily.cost_nanos))
        .where(daily.day >= day)
        .group_by(daily.group_id)
    )
    rows = conn.execute(query)
    return {group_id: int(total) for group_id, total in rows}


def key_spend_since(conn: Connection, day: date) -> dict[int, int]:
    daily = usage_daily_keys.c
    query = (
        select(daily.key_id, func.sum(daily.cost_nanos))
        .where(daily.day >= day)
        .group_by(daily.key_id)
    )
    return {key_id: int(total) for key_id, total in conn.execute(query)}


def count_usage(conn: Connection, group_id: int | None = None) -> int:
    query = select(func.count()).select_from(usage_records).where(usage_records.c.admitted)
    if group_id is not None:
        query = query.where(usage_records.c.group_id == group_id)
    return int(conn.execute(query).scalar_one())


def prune_usage(conn: Connection, before: datetime) -> int:
    result = conn.execute(delete(usage_records).where(usage_records.c.created_at < before))
    return int(result.rowcount)


def _first_of_each(records: Sequence[UsageRecord]) -> dict[str, UsageRecord]:
    """The first record of each request id, sorted by request id."""
    unique: dict[str, UsageRecord] = {}
    for record in records:
        unique.setdefault(record.request_id, record)
    return dict(sorted(unique.items()))


def _insert_new(conn: Connection, records: Iterable[UsageRecord]) -> set[str]:
    statement = (
        _insert(conn, usage_records)
        .on_conflict_do_nothing(index_elements=[usage_records.c.request_id])
        .returning(usage_records.c.request_id)
    )
    result = conn.execute(statement, [_raw_row(record) for record in records])
    return set(result.scalars())


def _add_to_rollups(conn: Connection, records: Sequence[UsageRecord]) -> None:
    _add_to(conn, usage_daily, ("group_id", "day", "model"), _rollup_rows(records))


def _add_to_key_rollups(conn: Connection, records: Sequence[UsageRecord]) -> None:
    _add_to(conn, usage_daily_keys, ("key_id", "day", "model"), _key_rollup_rows(records))


def _add_to(
    conn: Connection, table: Table, keys: tuple[str, ...], rows: list[dict[str, Any]]
) -> None:
    """Add ``rows``' totals to a rollup table's rows of the same ``keys``, inserting those
    not there yet."""
    insert = _insert(conn, table)
    daily = table.c
    statement = insert.on_conflict_do_update(
        index_elements=[daily[name] for name in keys],
        set_={name: daily[name] + insert.excluded[name] for name in ROLLUP_TOTALS},
    )
    conn.execute(statement, rows)


def _key_rollup_rows(records: Sequence[UsageRecord]) -> list[dict[str, Any]]:
    """The records summed per (key, UTC day, model), in key order."""
    groups = {record.key_id: record.group_id for record in records}
    totals = _summed(records, lambda record: record.key_id)
    return [
        {
            "key_id": key_id,
            "day": day,
            "model": model,
            "group_id": groups[key_id],
            **dict(zip(ROLLUP_TOTALS, sums, strict=True)),
        }
        for (key_id, day, model), sums in totals
    ]


def _stamp_last_use(conn: Connection, records: Sequence[UsageRecord]) -> None:
    """Move each key's ``last_used_at`` forward to its newest record (never back), in key
    order so that concurrent writers lock the rows in the same order."""
    newest: dict[int, datetime] = {}
    for record in records:
        at = as_utc(record.created_at)
        if record.key_id not in newest or newest[record.key_id] < at:
            newest[record.key_id] = at
    keys = api_keys.c
    statement = (
        update(api_keys)
        .where(keys.id == bindparam("key"))
        .where(or_(keys.last_used_at.is_(None), keys.last_used_at < bindparam("at")))
        .values(last_used_at=bindparam("at"))
    )
    rows = [{"key": key_id, "at": at} for key_id, at in sorted(newest.items())]
    conn.execute(statement, rows)


def _rollup_rows(records: Sequence[UsageRecord]) -> list[dict[str, Any]]:
    """The records summed per (group, UTC day, model), in key order."""
    return [
        {
            "group_id": group_id,
            "day": day,
            "model": model,
            **dict(zip(ROLLUP_TOTALS, sums, strict=True)),
        }
        for (group_id, day, model), sums in _summed(records, lambda record: record.group_id)
    ]


def _summed(
    records: Sequence[UsageRecord], owner: Callable[[UsageRecord], int]
) -> list[tuple[RollupKey, list[int]]]:
    """The records' ``ROLLUP_TOTALS`` summed per (``owner``, UTC day, model), sorted."""
    totals: dict[RollupKey, list[int]] = {}
    for record in records:
        key = (owner(record), as_utc(record.created_at).date(), record.model)
        sums = totals.setdefault(key, [0] * len(ROLLUP_TOTALS))
        for index, value in enumerate(_totals(record)):
            sums[index] += value
    return sorted(totals.items())


def _totals(record: UsageRecord) -> tuple[int, ...]:
    """One record's share of each ``ROLLUP_TOTALS`` column."""
    return (
        1,
        record.prompt_tokens,
        record.completion_tokens,
        record.characters,
        record.audio_ms,
        record.cost_nanos,
        record.cached_tokens,
        record.cache_write_tokens,
    )


def _raw_row(record: UsageRecord) -> dict[str, Any]:
    return {
        "request_id": record.request_id,
        "created_at": record.created_at,
        "group_id": record.group_id,
        "key_id": record.key_id,
        "model": record.model,
        "channel": record.channel,
        "endpoint": record.endpoint,
        "status": record.status,
        "latency_ms": record.latency_ms,
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "characters": record.characters,
        "audio_ms": record.audio_ms,
        "cost_nanos": record.cost_nanos,
        "estimated": record.estimated,
        "cached_tokens": record.cached_tokens,
        "cache_write_tokens": record.cache_write_tokens,
        "model_requested": record.model_requested,
        "error_code": record.error_code,
        "first_byte_ms": record.first_byte_ms,
        "admitted": record.admitted,
        "request_count": record.request_count,
        "search_units": record.search_units,
        "key_prefix": record.key_prefix or None,
        "error_detail": record.error_detail,
        "price": record.price,
    }


def _insert(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    """The dialect's own INSERT, which knows ``ON CONFLICT`` (PostgreSQL's is loaded only
    for a PostgreSQL database, which a SQLite worker does not need)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql  # on first use

        return postgresql.insert(table)
    return sqlite.insert(table)
