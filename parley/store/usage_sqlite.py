"""``record_usage`` on a SQLite file: a whole batch in one thread hop and six statements.

Through SQLAlchemy and aiosqlite a batch costs statement compilation and per-row bind
processing on the event loop, and a round trip between the loop and a thread for each
``RETURNING`` row. On a worker serving calls at full rate every round trip waits for a
turn of the busy loop and for the GIL, so such a writer falls behind and admission refuses
calls (``usage.queue_size``). Here the batch is one call into a thread of its own
with its own connection, and every statement carries its rows as one JSON parameter read
with ``json_each``: six statements, each one step, whatever the batch size, and fixed
statement texts (so they stay prepared: no growing cache of one text per batch size).

Same semantics as ``usage_sql.record_usage``: inside ``BEGIN IMMEDIATE`` (the file's
write lock, so no other writer runs between the statements) the ids already stored are
looked up, only the others are inserted, added to ``usage_daily`` and
``usage_daily_keys`` (admitted calls only: refusals are request-log lines) and move the
keys' ``last_used_at`` forward. Values are
written in the text forms SQLAlchemy's SQLite types write and read back
(``UtcDateTime``: ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC; ``Date``: ``YYYY-MM-DD``;
booleans 0/1), pinned by the store contract tests.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import orjson

from parley.domain.usage import UsageRecord
from parley.store.schema import ROLLUP_TOTALS, as_utc

MINIMUM_VERSION = (3, 33, 0)
"""``UPDATE … FROM`` (3.33) and ``json_each`` (built in since 3.38, in most builds before)."""

_RAW_COLUMNS = (
    "request_id",
    "created_at",
    "group_id",
    "key_id",
    "model",
    "channel",
    "endpoint",
    "status",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "characters",
    "audio_ms",
    "cost_nanos",
    "estimated",
    "model_requested",
    "error_code",
    "first_byte_ms",
    "admitted",
)
_CACHE_COLUMNS = ("cached_tokens", "cache_write_tokens")
"""Written only by a batch that holds prompt-cache counts: the columns default to 0, and
each bound parameter costs the sqlite3 module about as much as a column's worth of work
in the rest of the insert."""
_ROLLUP_COLUMNS = ("group_id", "day", "model", *ROLLUP_TOTALS)


CHUNKS = (256, 128, 64, 32, 16, 8, 4, 2, 1)
"""Rows per ``INSERT … VALUES`` statement: a batch is cut into these sizes, so a batch of
any size is a handful of statements (500 = 256 + 128 + 64 + 32 + 16 + 4) from nine fixed
texts that stay prepared. One statement per row (``executemany``) would hand the GIL
over once per row, and on a busy worker each hand-over waits up to the switch interval."""


def _values(columns: Sequence[str], rows: int) -> str:
    row = f"({', '.join('?' * len(columns))})"
    return f"({', '.join(columns)}) VALUES {', '.join([row] * rows)}"


INSERT_RAW = {size: f"INSERT INTO usage_records {_values(_RAW_COLUMNS, size)}" for size in CHUNKS}
INSERT_CACHED = {
    size: f"INSERT INTO usage_records {_values((*_RAW_COLUMNS, *_CACHE_COLUMNS), size)}"
    for size in CHUNKS
}
FIND_STORED = (
    "SELECT value FROM json_each(?)"
    " WHERE EXISTS (SELECT 1 FROM usage_records WHERE request_id = value)"
)
ADD_TO_ROLLUPS = (
    f"INSERT INTO usage_daily ({', '.join(_ROLLUP_COLUMNS)}) SELECT "
    + ", ".join(f"json_extract(value, '$[{index}]')" for index in range(len(_ROLLUP_COLUMNS)))
    + " FROM json_each(?) WHERE true ON CONFLICT (group_id, day, model) DO UPDATE SET "
    + ", ".join(f"{name} = {name} + excluded.{name}" for name in ROLLUP_TOTALS)
)
_KEY_ROLLUP_COLUMNS = ("key_id", "day", "model", "group_id", *ROLLUP_TOTALS)
ADD_TO_KEY_ROLLUPS = (
    f"INSERT INTO usage_daily_keys ({', '.join(_KEY_ROLLUP_COLUMNS)}) SELECT "
    + ", ".join(f"json_extract(value, '$[{index}]')" for index in range(len(_KEY_ROLLUP_COLUMNS)))
    + " FROM json_each(?) WHERE true ON CONFLICT (key_id, day, model) DO UPDATE SET "
    + ", ".join(f"{name} = {name} + excluded.{name}" for name in ROLLUP_TOTALS)
)
STAMP_LAST_USE = (
    "UPDATE api_keys SET last_used_at = stamp.at FROM"
    " (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS at"
    " FROM json_each(?)) AS stamp"
    " WHERE api_keys.id = stamp.id"
    " AND (api_keys.last_used_at IS NULL OR api_keys.last_used_at < stamp.at)"
)


def supported() -> bool:
    return sqlite3.sqlite_version_info >= MINIMUM_VERSION


class SqliteUsageWriter:
    """One connection to the file, used only from one thread of its own."""

    def __init__(self, path: str, pragmas: Sequence[str], timeout: float) -> None:
        self._path = path
        self._pragmas = tuple(pragmas)
        self._timeout = timeout
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parley-usage")
        self._conn: sqlite3.Connection | None = None
        self._cursor: sqlite3.Cursor | None = None
        self._closed = False

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._write, records)

    async def close(self) -> None:
        """Close the connection and end the thread (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._thread, self._close)
        finally:
            self._thread.shutdown(wait=False)

    def _open(self) -> sqlite3.Cursor:
        """The one cursor every statement runs on. ``Connection.execute`` makes a cursor
        per statement, and the connection keeps a weak reference to each until its 200th:
        made during a burst, those sat in the burst's memory and kept it from being given
        back (docs/performance.md)."""
        if self._cursor is None:
            # autocommit mode: the transaction is this module's own BEGIN IMMEDIATE / COMMIT
            statements = 2 * len(CHUNKS) + 9  # every text this module runs, kept prepared
            conn = sqlite3.connect(
                self._path,
                timeout=self._timeout,
                isolation_level=None,
                cached_statements=statements,
            )
            cursor = conn.cursor()
            for pragma in self._pragmas:
                cursor.execute(f"PRAGMA {pragma}")
            self._conn, self._cursor = conn, cursor
        return self._cursor

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = self._cursor = None

    def _write(self, records: Sequence[UsageRecord]) -> int:
        unique: dict[str, UsageRecord] = {}
        for record in records:
            unique.setdefault(record.request_id, record)
        if not unique:
            return 0
        cursor = self._open()
        cursor.execute("BEGIN IMMEDIATE")
        try:
            for (stored,) in cursor.execute(FIND_STORED, (orjson.dumps(list(unique)),)).fetchall():
                del unique[stored]
            if unique:
                rows, rollups, last_use = _rows(unique.values())
                key_rollups = _key_rollups(unique.values())
                inserts = INSERT_RAW
                if any(r.cached_tokens or r.cache_write_tokens for r in unique.values()):
                    inserts = INSERT_CACHED
                    cached = [(r.cached_tokens, r.cache_write_tokens) for r in unique.values()]
                    rows = [row + pair for row, pair in zip(rows, cached, strict=True)]
                start = 0
                for size in CHUNKS:
                    while len(rows) - start >= size:
                        chunk = rows[start : start + size]
                        cursor.execute(inserts[size], [value for row in chunk for value in row])
                        start += size
                cursor.execute(ADD_TO_ROLLUPS, (orjson.dumps(rollups),))
                cursor.execute(ADD_TO_KEY_ROLLUPS, (orjson.dumps(key_rollups),))
                cursor.execute(STAMP_LAST_USE, (orjson.dumps(last_use),))
            cursor.execute("COMMIT")
        except BaseException:
            if cursor.connection.in_transaction:
                cursor.execute("ROLLBACK")
            raise
        return len(unique)


def _text(at: datetime) -> str:
    """``UtcDateTime``'s SQLite text: UTC, no zone, microseconds (26 characters)."""
    if at.tzinfo is not UTC:
        at = as_utc(at)
    return at.isoformat(" ", "microseconds")[:26]


Row = tuple[object, ...]


def _rows(records: Iterable[UsageRecord]) -> tuple[list[Row], list[list[object]], list[Row]]:
    """The raw rows; the records summed per (group, UTC day, model); each key's newest
    record time (text of one fixed width sorts in time order)."""
    rows: list[Row] = []
    totals: dict[tuple[int, str, str], list[int]] = {}
    newest: dict[int, str] = {}
    for record in records:
        at = _text(record.created_at)
        rows.append(
            (
                record.request_id,
                at,
                record.group_id,
                record.key_id,
                record.model,
                record.channel,
                record.endpoint,
                record.status,
                record.latency_ms,
                record.prompt_tokens,
                record.completion_tokens,
                record.characters,
                record.audio_ms,
                record.cost_nanos,
                1 if record.estimated else 0,
                record.model_requested,
                record.error_code,
                record.first_byte_ms,
                1 if record.admitted else 0,
            )
        )
        if newest.get(record.key_id, "") < at:
            newest[record.key_id] = at
        if not record.admitted:
            continue  # a refusal is a request-log line, not usage
        key = (record.group_id, at[:10], record.model)
        sums = totals.get(key)
        if sums is None:
            sums = totals[key] = [0, 0, 0, 0, 0, 0, 0, 0]  # ROLLUP_TOTALS, in order
        _add(sums, 0, record)
    return rows, [[*key, *sums] for key, sums in totals.items()], list(newest.items())


def _key_rollups(records: Iterable[UsageRecord]) -> list[list[object]]:
    """The admitted calls summed per (key, UTC day, model), with the key's group."""
    totals: dict[tuple[int, str, str], list[int]] = {}
    for record in records:
        if not record.admitted:
            continue
        key = (record.key_id, _text(record.created_at)[:10], record.model)
        sums = totals.get(key)
        if sums is None:
            sums = totals[key] = [record.group_id, 0, 0, 0, 0, 0, 0, 0, 0]
        _add(sums, 1, record)
    return [[*key, *sums] for key, sums in totals.items()]


def _add(sums: list[int], at: int, record: UsageRecord) -> None:
    """Add one admitted call to the ``ROLLUP_TOTALS`` sums that start at ``sums[at]``."""
    sums[at] += 1
    sums[at + 1] += record.prompt_tokens
    sums[at + 2] += record.completion_tokens
    sums[at + 3] += record.characters
    sums[at + 4] += record.audio_ms
    sums[at + 5] += record.cost_nanos
    sums[at + 6] += record.cached_tokens
    sums[at + 7] += record.cache_write_tokens
