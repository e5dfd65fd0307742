"""The plain SQL a SQLite file's worker serves with (``sqlite_serving.py``), and the
functions that run it: each takes one ``sqlite3`` cursor and is one unit of work. Each
answers as the ``*_sql.py`` query of the same name does through SQLAlchemy; timestamps go
in and out as ``UtcDateTime``'s text (``plain.utc_text``, ``plain.utc_from_text``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import date
from typing import Any

from parley.domain.batches import RUNNING
from parley.domain.channels import ChannelEvent
from parley.domain.content import StoredContent
from parley.domain.groups import Group
from parley.domain.keys import KeyRecord
from parley.domain.responses import TURNS_PER_COPY, StoredResponse
from parley.store import records
from parley.store.plain import utc_from_text, utc_text

PRUNE_ROUNDS = TURNS_PER_COPY + 1
"""As ``responses_sql.PRUNE_ROUNDS``: a conversation's turns go from its newest back."""


def day_text(day: date) -> str:
    """A day as SQLAlchemy's SQLite ``Date`` writes it (``usage_daily.day``)."""
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"


def select(table: str) -> str:
    """``SELECT`` of the table's columns, as ``select(table)`` names them."""
    return f"SELECT {', '.join(records.COLUMNS[table])} FROM {table}"


LIST_GROUPS = f"{select('groups')} ORDER BY id"
KEYS_CHANGED_SINCE = f"{select('api_keys')} WHERE updated_at >= ? ORDER BY id"
FIND_KEY = f"{select('api_keys')} WHERE digest = ? OR previous_digest = ? LIMIT 1"
SPEND_SINCE = "SELECT group_id, sum(cost_nanos) FROM usage_daily WHERE day >= ? GROUP BY group_id"
KEY_SPEND_SINCE = (
    "SELECT key_id, sum(cost_nanos) FROM usage_daily_keys WHERE day >= ? GROUP BY key_id"
)
PRUNE_USAGE = "DELETE FROM usage_records WHERE created_at < ?"
LIST_CHANNELS = f"{select('channels')} ORDER BY name"
RECORD_CHANNEL_EVENT = (
    "INSERT INTO channel_events"
    " (channel, model, kind, state, status, latency_ms, message, actor, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
RECORD_AUDIT = (
    "INSERT INTO audit_log (created_at, actor, address, action, target, detail)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
SAVE_CONTENT = (
    "INSERT INTO call_contents"
    " (request_id, group_id, policy, sealed, body, created_at, expires_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (request_id) DO NOTHING"
)
PRUNE_CHANNEL_EVENTS = "DELETE FROM channel_events WHERE created_at < ?"
LIST_MODELS = f"{select('models')} ORDER BY name"
PURGE_CONTENTS = (
    "DELETE FROM call_contents WHERE request_id IN (SELECT request_id FROM call_contents"
    " WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)"
)
EXPIRED_FILES = "SELECT id FROM files WHERE expires_at <= ? LIMIT ?"
FORGET_FILES = "DELETE FROM files WHERE id IN (SELECT value FROM json_each(?))"
SAVE_RESPONSE = (
    "INSERT INTO stored_responses (id, group_id, model, response, input_items, history,"
    " created_at, expires_at, previous_response_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (id) DO NOTHING"
)
FOUND_RESPONSE = "id = ? AND group_id = ? AND expires_at > ? AND deleted_at IS NULL"
"""A response its group can read by id: unexpired, not deleted (``responses_sql._found``)."""
FIND_RESPONSE = f"{select('stored_responses')} WHERE {FOUND_RESPONSE}"
FIND_TURNS = (
    "WITH RECURSIVE chain (id, previous_response_id, depth) AS ("
    f" SELECT id, previous_response_id, 1 FROM stored_responses WHERE {FOUND_RESPONSE}"
    " UNION ALL SELECT earlier.id, earlier.previous_response_id, chain.depth + 1"
    " FROM stored_responses AS earlier JOIN chain ON earlier.id = chain.previous_response_id"
    " WHERE earlier.group_id = ? AND chain.depth < ?)"
    f" SELECT {', '.join('stored_responses.' + c for c in records.COLUMNS['stored_responses'])}"
    " FROM stored_responses JOIN chain ON chain.id = stored_responses.id ORDER BY chain.depth"
)
HIDE_RESPONSE = (
    "UPDATE stored_responses SET deleted_at = ?"
    " WHERE id = ? AND group_id = ? AND deleted_at IS NULL"
)
UNREFERENCED = (
    "NOT EXISTS (SELECT 1 FROM stored_responses AS later"
    " WHERE later.previous_response_id = stored_responses.id)"
)
"""No stored response continues this one (``responses_sql._unreferenced``)."""
DELETE_UNREFERENCED_RESPONSE = f"DELETE FROM stored_responses WHERE id = ? AND {UNREFERENCED}"
PRUNE_RESPONSES = (
    "DELETE FROM stored_responses"
    f" WHERE (expires_at <= ? OR deleted_at IS NOT NULL) AND {UNREFERENCED}"
)
RUNNABLE_BATCHES = (
    f"{select('batches')} WHERE status IN ({', '.join('?' * len(RUNNING))}) ORDER BY id"
)
LINE_COUNTS = (
    "SELECT batch_id, state, count(*) FROM batch_lines"
    " WHERE batch_id IN (SELECT value FROM json_each(?)) GROUP BY batch_id, state"
)
FORGET_DEAD_LANES = "DELETE FROM batch_lanes WHERE expires_at < ?"
RENEW_LANE = "UPDATE batch_lanes SET expires_at = ? WHERE id = ?"
ADD_LANE = "INSERT INTO batch_lanes (id, expires_at) VALUES (?, ?)"
DROP_LANE = "DELETE FROM batch_lanes WHERE id = ?"
DROP_OTHER_LANES = "DELETE FROM batch_lanes WHERE id != ?"


def rows(cursor: sqlite3.Cursor, table: str, sql: str, params: Sequence[Any]) -> list[records.Row]:
    """The rows ``sql`` selects from ``table``, by column name, their timestamps read
    from SQLite's text as ``UtcDateTime`` reads them."""
    cursor.execute(sql, params)
    names = [column[0] for column in cursor.description]
    stamps = [index for index, name in enumerate(names) if name in records.TIMESTAMPS[table]]
    found: list[records.Row] = []
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        for index in stamps:
            text = values[index]
            if text is not None:
                row[names[index]] = utc_from_text(text)
        found.append(row)
    return found


def insert(cursor: sqlite3.Cursor, sql: str, params: Sequence[Any]) -> int:
    """Run an ``INSERT`` of one row; the row's id."""
    cursor.execute(sql, params)
    row_id = cursor.lastrowid
    if row_id is None:
        raise sqlite3.DatabaseError("the insert made no row")
    return row_id


def delete(cursor: sqlite3.Cursor, sql: str, params: Sequence[Any]) -> int:
    """Run a ``DELETE`` (or another change); how many rows it changed."""
    cursor.execute(sql, params)
    return int(cursor.rowcount)


def revision(cursor: sqlite3.Cursor) -> str | None:
    """The revision the file is at; ``None`` if it has none yet or cannot say (as
    ``engine._current_revision``)."""
    try:
        rows = cursor.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def list_groups(cursor: sqlite3.Cursor) -> list[Group]:
    return [records.group(row) for row in rows(cursor, "groups", LIST_GROUPS, ())]


def keys_changed_since(cursor: sqlite3.Cursor, since: str) -> list[KeyRecord]:
    return [records.key(row) for row in rows(cursor, "api_keys", KEYS_CHANGED_SINCE, (since,))]


def find_key(cursor: sqlite3.Cursor, digest: str) -> KeyRecord | None:
    """The key whose secret, or whose secret replaced by a rotation, has this digest."""
    found = rows(cursor, "api_keys", FIND_KEY, (digest, digest))
    return records.key(found[0]) if found else None


def totals(cursor: sqlite3.Cursor, sql: str, day: str) -> dict[int, int]:
    return {owner: int(total) for owner, total in cursor.execute(sql, (day,))}


def of_model_and_group(
    cursor: sqlite3.Cursor, table: str, model: str | None, group_id: int | None
) -> list[records.Row]:
    """The table's rows (clones, or deletions) of one model and/or one group, by id."""
    where: list[str] = []
    params: list[Any] = []
    if model is not None:
        where.append("model = ?")
        params.append(model)
    if group_id is not None:
        where.append("group_id = ?")
        params.append(group_id)
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return rows(cursor, table, f"{select(table)}{condition} ORDER BY id", params)


def event_values(event: ChannelEvent) -> tuple[Any, ...]:
    return (
        event.channel,
        event.model,
        event.kind,
        event.state,
        event.status,
        event.latency_ms,
        event.message,
        event.actor,
        utc_text(event.created_at),
    )


def record_channel_events(cursor: sqlite3.Cursor, rows: list[tuple[Any, ...]]) -> None:
    cursor.executemany(RECORD_CHANNEL_EVENT, rows)


def content_values(content: StoredContent) -> tuple[Any, ...]:
    return (
        content.request_id,
        content.group_id,
        content.policy,
        1 if content.sealed else 0,
        content.body,
        utc_text(content.created_at),
        utc_text(content.expires_at),
    )


def expired_files(cursor: sqlite3.Cursor, now: str, most: int) -> list[str]:
    return [file_id for (file_id,) in cursor.execute(EXPIRED_FILES, (now, most))]


def response_values(response: StoredResponse) -> tuple[Any, ...]:
    return (
        response.id,
        response.group_id,
        response.model,
        response.response,
        response.input_items,
        response.history,
        utc_text(response.created_at),
        utc_text(response.expires_at),
        response.previous_response_id,
    )


def changed(cursor: sqlite3.Cursor, sql: str, rows: list[tuple[Any, ...]]) -> int:
    """Run ``sql`` once for each row; how many rows it changed in all (an insert that
    met a conflict and did nothing changes none)."""
    cursor.executemany(sql, rows)
    return int(cursor.rowcount)


def delete_response(cursor: sqlite3.Cursor, response_id: str, group_id: int, now: str) -> bool:
    """As ``responses_sql.delete_response``: hidden at once, and deleted unless a later
    turn continues it (then pruned after that turn)."""
    if not cursor.execute(HIDE_RESPONSE, (now, response_id, group_id)).rowcount:
        return False
    cursor.execute(DELETE_UNREFERENCED_RESPONSE, (response_id,))
    return True


def prune_responses(cursor: sqlite3.Cursor, now: str) -> int:
    """As ``responses_sql.prune_responses``: every expired or deleted response no other
    continues, a conversation's turns from its newest back, one turn a round."""
    pruned = 0
    for _ in range(PRUNE_ROUNDS):
        count = int(cursor.execute(PRUNE_RESPONSES, (now,)).rowcount)
        pruned += count
        if not count:
            break
    return pruned


def line_counts(cursor: sqlite3.Cursor, batch_ids: str) -> list[tuple[str, str, int]]:
    return list(cursor.execute(LINE_COUNTS, (batch_ids,)))


def beat_lane(cursor: sqlite3.Cursor, lane: str, until: str, now: str) -> None:
    """As ``batches_sql.beat_lane``: renew the lease (adding it the first time) and
    forget the lanes whose lease ran out."""
    cursor.execute(FORGET_DEAD_LANES, (now,))
    if not cursor.execute(RENEW_LANE, (until, lane)).rowcount:
        cursor.execute(ADD_LANE, (lane, until))
