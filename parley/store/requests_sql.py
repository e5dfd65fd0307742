"""The request log read back: usage records with their key's label, the prefix of the
secret that made each, and their group's name, newest first, filtered, one page at a time.

Pages are keyed by ``(created_at, request_id)`` (a cursor, not an offset), so a page
costs the same however far back it is and a line written meanwhile never shifts one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, and_, func, or_, select, text

from parley.domain.requests import LoggedRequest, RequestQuery
from parley.domain.usage import UsageRecord
from parley.store.plain import as_utc
from parley.store.schema import FAILED_ONLY, api_keys, groups, usage_records

FAILED_STATUS = 400

_RECORD_COLUMNS = tuple(column.name for column in usage_records.columns)


def list_requests(conn: Connection, query: RequestQuery) -> list[LoggedRequest]:
    rows = conn.execute(_select(query)).mappings()
    return [_logged(row) for row in rows]


def find_request(conn: Connection, request_id: str) -> LoggedRequest | None:
    statement = _joined().where(usage_records.c.request_id == request_id)
    row = conn.execute(statement).mappings().first()
    return None if row is None else _logged(row)


def prefix_cost(conn: Connection, prefix: str, group_id: int, since: datetime) -> tuple[int, int]:
    """The cost (nano-USD) and number of the group's lines since ``since`` whose request
    id starts with ``prefix`` (a batch's lines: ``domain/batches.lines_prefix``), read
    through the group's index by time."""
    records = usage_records.c
    statement = select(func.coalesce(func.sum(records.cost_nanos), 0), func.count()).where(
        records.group_id == group_id,
        records.created_at >= since,
        records.request_id.startswith(prefix, autoescape=True),
    )
    row = conn.execute(statement).one()
    return int(row[0]), int(row[1])


def _joined() -> Select[Any]:
    records, keys = usage_records.c, api_keys.c
    joined = usage_records.outerjoin(api_keys, keys.id == records.key_id).outerjoin(
        groups, groups.c.id == records.group_id
    )
    return select(
        usage_records,
        keys.name.label("key_name"),
        keys.prefix.label("current_prefix"),
        keys.previous_digest.label("rotated"),
        groups.c.name.label("group_name"),
    ).select_from(joined)


def _select(query: RequestQuery) -> Select[Any]:
    records = usage_records.c
    statement = _joined()
    if query.since is not None:
        statement = statement.where(records.created_at >= query.since)
    if query.until is not None:
        statement = statement.where(records.created_at < query.until)
    if query.group_id is not None:
        statement = statement.where(records.group_id == query.group_id)
    if query.key_id is not None:
        statement = statement.where(records.key_id == query.key_id)
    if query.model is not None:
        statement = statement.where(
            or_(records.model == query.model, records.model_requested == query.model)
        )
    if query.status is not None:
        low, high = query.status.low, query.status.high
        within = records.status == low if low == high else records.status.between(low, high)
        statement = statement.where(within)
        if low >= FAILED_STATUS:  # the partial index's own words, so SQLite uses it
            statement = statement.where(text(f"usage_records.{FAILED_ONLY}"))
    if query.request_prefix is not None:
        statement = statement.where(
            records.request_id.startswith(query.request_prefix, autoescape=True)
        )
    if query.after is not None:
        at, request_id = query.after
        statement = statement.where(
            or_(
                records.created_at < at,
                and_(records.created_at == at, records.request_id < request_id),
            )
        )
    order = (records.created_at.desc(), records.request_id.desc())
    return statement.order_by(*order).limit(query.limit)


def _logged(row: Any) -> LoggedRequest:
    values = {name: row[name] for name in _RECORD_COLUMNS}
    values["created_at"] = as_utc(values["created_at"])
    values["key_prefix"] = own = values["key_prefix"] or ""
    # A line written before lines kept their prefix: the key's own is right only when
    # the key never had another.
    current = row["current_prefix"] if row["rotated"] is None else None
    return LoggedRequest(
        record=UsageRecord(**values),
        group=row["group_name"],
        key_name=row["key_name"],
        key_prefix=own or current,
    )
