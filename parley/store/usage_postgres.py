"""``record_usage`` on PostgreSQL: a whole batch in one statement on a connection of its own.

``SqlStore`` writes usage with it on PostgreSQL, in place of ``usage_sql.record_usage``
on SQLAlchemy, and to the same rules, which the store contract tests pin for both: only
the records not stored yet are inserted (the first of each request id), only those of
admitted calls are added to ``usage_daily`` and ``usage_daily_keys`` (refusals are
request-log lines), and the keys' ``last_used_at`` only moves forward.

A batch is one ``RECORD`` statement, and so one round trip and one transaction. The
records go in as one parameter, a JSON array of rows made by one ``orjson`` call
(``rows``); the ``INSERT … ON CONFLICT (request_id) DO NOTHING RETURNING`` says which rows
are new, atomically against any other writer, and the rollups and key stamps are summed
from those rows by the statement itself, so no id is looked up and nothing is counted
that was not inserted. A write in doubt (its answer lost) tried again therefore adds
nothing twice. Its text is fixed, so asyncpg prepares it once per connection. Rows are
written in sorted order (request ids, rollup keys, key ids, by code point as ``usage_sql``
sorts them) so concurrent writers take their row locks in the same order and cannot
deadlock each other.

The connection is the writer's own, opened as the store's engine opens its connections
(``engine.asyncpg_connect_args``: the same server, schema as ``search_path``, connect and
statement timeouts), and kept between batches; one the server closed is opened again at
the next batch. Each write runs in a task of its own that the caller awaits shielded,
as ``database_async`` runs a unit of work: a cancelled caller stops waiting, the statement
still finishes, and ``close`` waits for it.

What SQLAlchemy's path spends a record, its objects and its bound-parameter processing
on the worker's event loop, every call pays: that is why this module is apart from
``usage_sql`` (docs/performance.md, Eight workers on one SQLite file).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import asyncpg
import orjson

from parley.domain.usage import UsageRecord
from parley.store.base import StoreFault, StoreUnavailable
from parley.store.plain import ROLLUP_TOTALS

_RAW_COLUMNS = (
    ("request_id", "text"),
    ("created_at", "timestamptz"),
    ("group_id", "int4"),
    ("key_id", "int4"),
    ("model", "text"),
    ("channel", "text"),
    ("endpoint", "text"),
    ("status", "int4"),
    ("latency_ms", "int4"),
    ("prompt_tokens", "int8"),
    ("completion_tokens", "int8"),
    ("characters", "int8"),
    ("audio_ms", "int8"),
    ("cost_nanos", "int8"),
    ("estimated", "bool"),
    ("cached_tokens", "int8"),
    ("cache_write_tokens", "int8"),
    ("model_requested", "text"),
    ("error_code", "text"),
    ("first_byte_ms", "int4"),
    ("admitted", "bool"),
    ("request_count", "int4"),
    ("search_units", "int8"),
    ("key_prefix", "text"),
    ("error_detail", "text"),
    ("price", "text"),
)
"""``usage_records``' columns, named as ``UsageRecord``'s fields, with each value's type."""
_NAMES = tuple(name for name, _ in _RAW_COLUMNS)
_VALUES = attrgetter(*_NAMES)
"""A record's values in ``_RAW_COLUMNS`` order, as one tuple made in C."""

_C = 'COLLATE "C"'
"""Text compared by code point, as Python sorts it (``usage_sql``'s lock order)."""
_FIELDS = ", ".join(
    f"(r->>{index}) AS {name}" if kind == "text" else f"(r->>{index})::{kind} AS {name}"
    for index, (name, kind) in enumerate(_RAW_COLUMNS)
)
_SUMS = ", ".join(f"sum({name})" for name in ROLLUP_TOTALS[1:])
_ADDED = ", ".join(f"{name} = {{table}}.{name} + excluded.{name}" for name in ROLLUP_TOTALS)
_TOTALS = ", ".join(ROLLUP_TOTALS)

RECORD = f"""
WITH fresh AS (
    INSERT INTO usage_records ({", ".join(_NAMES)})
    SELECT DISTINCT ON (request_id {_C}) {
    ", ".join("NULLIF(key_prefix, '')" if name == "key_prefix" else name for name in _NAMES)
}
    FROM (
        SELECT {_FIELDS}, position
        FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS batch (r, position)
    ) AS given
    ORDER BY request_id {_C}, position
    ON CONFLICT (request_id) DO NOTHING
    RETURNING request_id, created_at, group_id, key_id, model, admitted, {
    ", ".join(ROLLUP_TOTALS[1:])
}
), calls AS (
    SELECT *, (created_at AT TIME ZONE 'UTC')::date AS day,
        first_value(group_id) OVER (PARTITION BY key_id ORDER BY request_id {_C} DESC)
            AS key_group
    FROM fresh WHERE admitted
), daily AS (
    INSERT INTO usage_daily (group_id, day, model, {_TOTALS})
    SELECT group_id, day, model, count(*), {_SUMS} FROM calls
    GROUP BY group_id, day, model ORDER BY group_id, day, model {_C}
    ON CONFLICT (group_id, day, model) DO UPDATE SET {_ADDED.format(table="usage_daily")}
), daily_keys AS (
    INSERT INTO usage_daily_keys (key_id, day, model, group_id, {_TOTALS})
    SELECT key_id, day, model, key_group, count(*), {_SUMS} FROM calls
    GROUP BY key_id, day, model, key_group ORDER BY key_id, day, model {_C}
    ON CONFLICT (key_id, day, model) DO UPDATE SET {_ADDED.format(table="usage_daily_keys")}
), newest AS (
    SELECT key_id, max(created_at) AS at FROM fresh GROUP BY key_id
), locked AS (
    SELECT api_keys.id, newest.at FROM api_keys JOIN newest ON api_keys.id = newest.key_id
    WHERE api_keys.last_used_at IS NULL OR api_keys.last_used_at < newest.at
    ORDER BY api_keys.id FOR UPDATE OF api_keys
), stamped AS (
    UPDATE api_keys SET last_used_at = locked.at FROM locked
    WHERE api_keys.id = locked.id
        AND (api_keys.last_used_at IS NULL OR api_keys.last_used_at < locked.at)
)
SELECT count(*) FROM fresh
"""
"""The whole batch, one parameter: a JSON array of rows (``rows``), each an array of
``_RAW_COLUMNS``' values in that order.

``DISTINCT ON`` keeps each id's first record (``position``, the order given); ``fresh``
is what the primary key let in, and everything after is summed from it: ``requests``
counts rows, as ``usage_sql`` does, and a key's rollup rows take the group of its last
admitted record by request id, as ``usage_sql`` gives them. ``locked`` takes the key rows'
locks in id order before the ``UPDATE`` writes them, whatever join the planner picks. An
empty ``key_prefix`` is stored as NULL, as ``usage_sql`` stores it."""
SESSION = {"timezone": "UTC"}
"""The writer's connection reads a time without a zone (a naive ``datetime``, written
without an offset) as UTC, as the store reads one (``as_utc``)."""


def rows(records: Sequence[UsageRecord]) -> str:
    """``RECORD``'s parameter: the records as one JSON array of rows.

    One ``orjson`` call over tuples made in C is the whole of the work a record costs the
    worker's event loop. asyncpg's own arrays (one a column, ``unnest``) cost several
    times as much: it asks each value whether it is itself an iterable, through the
    ``collections.abc`` classes, before it encodes it. A value JSON cannot hold (an
    integer past 64 bits) is a ``StoreFault``, as a value the database refuses is."""
    try:
        return orjson.dumps(list(map(_VALUES, records))).decode()
    except orjson.JSONEncodeError as error:
        raise StoreFault(f"a usage record could not be encoded: {error}") from error


class PostgresUsageWriter:
    """One asyncpg connection of its own, used by one batch at a time."""

    def __init__(self, connect: dict[str, Any], timeout: float) -> None:
        settings = {**connect.get("server_settings", {}), **SESSION}
        self._connect = {**connect, "server_settings": settings}
        """``asyncpg.connect``'s arguments (``engine.asyncpg_connect_args``), ``SESSION``
        added."""
        self._timeout = timeout
        self._conn: asyncpg.Connection | None = None
        self._turn = asyncio.Lock()
        self._running: set[asyncio.Task[int]] = set()
        self._closed = False

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        """Insert the records not stored yet and add them to the rollups; returns how
        many were inserted."""
        if self._closed:
            raise StoreUnavailable("the store is closed")
        if not records:
            return 0
        task = asyncio.ensure_future(self._write(rows(records)))
        self._running.add(task)
        task.add_done_callback(self._finished)
        return await asyncio.shield(task)

    async def close(self) -> None:
        """Wait for the write in flight, then close the connection (a second call does
        nothing)."""
        if self._closed:
            return
        self._closed = True
        if self._running:
            await asyncio.wait(self._running)
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            await conn.close(timeout=self._timeout)

    async def _write(self, batch: str) -> int:
        async with self._turn:
            conn = self._conn
            if conn is None or conn.is_closed():
                # none yet, or the server closed it between batches (a restart, an idle
                # timeout): asyncpg sees the close as it comes, so a new one is opened
                # here rather than a batch failing on it
                self._conn = conn = await asyncpg.connect(**self._connect)
            return await self._run(conn, batch)

    async def _run(self, conn: asyncpg.Connection, batch: str) -> int:
        try:
            return int(await conn.fetchval(RECORD, batch))
        except asyncpg.PostgresError:
            if conn.is_closed():
                self._conn = None
            raise  # the server refused the statement; the connection serves on
        except BaseException:
            # lost, timed out or cancelled mid-statement: the connection's state is
            # unknown, so it is dropped and the next batch opens another
            conn.terminate()
            self._conn = None
            raise

    def _finished(self, task: asyncio.Task[int]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a cancelled caller no longer will
