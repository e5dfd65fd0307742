"""``record_usage`` on a SQLite file: a whole batch in one thread hop and a few statements.

``SqlStore`` writes usage with it on a SQLite file, in place of
``usage_sql.record_usage``, and to the same rules, which the store contract tests pin for
both: inside ``BEGIN IMMEDIATE`` (the file's write lock, so no other writer runs between
the statements) only the records not stored yet are inserted, added to ``usage_daily``
and ``usage_daily_keys`` (admitted calls only: refusals are request-log lines) and move
the keys' ``last_used_at`` forward. Values are written in the text forms SQLAlchemy's
SQLite types write and read back (``UtcDateTime``: ``YYYY-MM-DD HH:MM:SS.ffffff`` in
UTC; ``Date``: ``YYYY-MM-DD``; booleans 0/1).

A batch is one call into a thread of its own with its own connection (the store's
pragmas). The raw rows go in a handful of multi-row ``INSERT … VALUES`` statements
(``CHUNKS``), and the rollups and key stamps, a few rows a batch, each as one JSON
parameter read with ``json_each``; every statement text is fixed, so all stay prepared.
The batch is inserted without looking its ids up: the primary key on ``request_id``
refuses a stored one, and only then (an id twice in the batch, a replayed spill, a write
in doubt tried again: rare) is the transaction rolled back and the batch written again
without its repeats and the ids ``FIND_STORED`` finds. One pass over the records
(``Batch``) builds every statement's parameters.

The writer's thread shares the worker's core and its GIL with the event loop, so what it
spends a record every call pays: that is why this module is apart from ``usage_sql``,
and docs/performance.md (Speed habits) says what each of its choices saves.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import orjson

from parley.domain.usage import UsageRecord
from parley.store.plain import ROLLUP_TOTALS, as_utc

MINIMUM_VERSION = (3, 33, 0)
"""``UPDATE … FROM`` (3.33) and ``json_each`` (built in since 3.38, in most builds before)."""
CACHE_PRAGMA = "cache_size = -512"
"""The writer's page cache, 512 KiB (SQLite's default is 2 MiB a connection). A batch
touches the ends of the table and its indexes and a few rollup rows, and the pages it
misses are in the system's file cache; the default filled up with the pages written, more
memory in every worker at steady load for no measurable gain (docs/performance.md,
Memory)."""

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
    "cached_tokens",
    "cache_write_tokens",
    "request_count",
    "search_units",
    "key_prefix",
    "error_detail",
    "price",
)
_ROLLUP_COLUMNS = ("group_id", "day", "model", *ROLLUP_TOTALS)


CHUNKS = (256, 128, 64, 32, 16, 8, 4, 2, 1)
"""Rows per ``INSERT … VALUES`` statement: a batch is cut into these sizes, so a batch of
any size is a handful of statements (500 = 256 + 128 + 64 + 32 + 16 + 4) from nine fixed
texts that stay prepared. One statement per row (``executemany``) would hand the GIL
over once per row, and on a busy worker each hand-over waits up to the switch interval."""

NO_VALUE = -1
"""Bound for a missing ``error_code``, ``first_byte_ms``, ``key_prefix``,
``error_detail`` or ``price`` and turned back into NULL by the statement
(``NULLIF(?, -1)``; a time is never negative, and a text never equals an integer): the
sqlite3 module binds ``None`` only after looking for an adapter, which costs more than
the integer (docs/performance.md, Speed habits)."""
_MAYBE_NULL = ("error_code", "first_byte_ms", "key_prefix", "error_detail", "price")


def _values(columns: Sequence[str], rows: int) -> str:
    nullable = f"NULLIF(?, {NO_VALUE})"
    row = f"({', '.join(nullable if column in _MAYBE_NULL else '?' for column in columns)})"
    return f"({', '.join(columns)}) VALUES {', '.join([row] * rows)}"


INSERT_RAW = {size: f"INSERT INTO usage_records {_values(_RAW_COLUMNS, size)}" for size in CHUNKS}
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

    async def record_decoded(
        self, payload: bytes, decode: Callable[[bytes], Sequence[UsageRecord]]
    ) -> int:
        """``record_usage`` of the records ``decode`` makes of ``payload``, decoded on the
        writer's thread: the host's usage writer (``usage_host.py``) decoding on its event
        loop held the GIL that this thread waits for between statements, inside the
        transaction."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._decode_and_write, payload, decode)

    def _decode_and_write(
        self, payload: bytes, decode: Callable[[bytes], Sequence[UsageRecord]]
    ) -> int:
        return self._write(decode(payload))

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
            statements = len(CHUNKS) + 9  # every text this module runs, kept prepared
            conn = sqlite3.connect(
                self._path,
                timeout=self._timeout,
                isolation_level=None,
                cached_statements=statements,
            )
            cursor = conn.cursor()
            for pragma in (*self._pragmas, CACHE_PRAGMA):
                cursor.execute(f"PRAGMA {pragma}")
            self._conn, self._cursor = conn, cursor
        return self._cursor

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = self._cursor = None

    def _write(self, records: Sequence[UsageRecord]) -> int:
        if not records:
            return 0
        cursor = self._open()
        batch, written = Batch(records), len(records)
        cursor.execute("BEGIN IMMEDIATE")
        try:
            try:
                _insert(cursor, batch)
            except sqlite3.IntegrityError:
                # An id twice in the batch, or one stored already (a replayed spill, a
                # write in doubt tried again): start over with each id's first record
                # that is not stored yet.
                cursor.execute("ROLLBACK")
                cursor.execute("BEGIN IMMEDIATE")
                unique: dict[str, UsageRecord] = {}
                for record in records:
                    unique.setdefault(record.request_id, record)
                found = cursor.execute(FIND_STORED, (orjson.dumps(list(unique)),)).fetchall()
                for (stored,) in found:
                    del unique[stored]
                batch, written = Batch(unique.values()), len(unique)
                _insert(cursor, batch)
            if written:
                cursor.execute(ADD_TO_ROLLUPS, (orjson.dumps(batch.rollups()),))
                cursor.execute(ADD_TO_KEY_ROLLUPS, (orjson.dumps(batch.key_rollups()),))
                cursor.execute(STAMP_LAST_USE, (orjson.dumps(list(batch.newest.items())),))
            cursor.execute("COMMIT")
        except BaseException:
            if cursor.connection.in_transaction:
                cursor.execute("ROLLBACK")
            raise
        return written


def _insert(cursor: sqlite3.Cursor, batch: Batch) -> None:
    """The batch's raw rows, in ``CHUNKS``-sized statements (a slice of its flat values
    each)."""
    values, width = batch.values, len(_RAW_COLUMNS)
    rows, start = len(values) // width, 0
    for size in CHUNKS:
        while rows >= size:
            cursor.execute(INSERT_RAW[size], values[start : start + size * width])
            start += size * width
            rows -= size


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)


class Batch:
    """What one write stores, made in one pass over its records.

    ``values`` is every raw row's values one after the other (``_RAW_COLUMNS`` each), as
    the ``INSERT`` statements bind them; ``totals`` the admitted calls summed per (group,
    key, UTC day, model); ``newest`` each key's newest record time. The time is written as
    ``UtcDateTime``'s SQLite text (UTC, no zone, microseconds: 26 characters), whose
    first 20 characters are made once per second of the batch: a batch's records are
    mostly a few seconds' calls, and ``datetime.isoformat`` formats the whole time and a
    zone that is then cut off.
    """

    __slots__ = ("newest", "totals", "values")

    def __init__(self, records: Collection[UsageRecord]) -> None:
        values: list[object] = []
        totals: dict[tuple[int, int, str, str], list[int]] = {}
        newest: dict[int, str] = {}
        low = high = _EPOCH
        second = ""
        for record in records:
            at = record.created_at
            if at.tzinfo is not UTC:
                at = as_utc(at)
            if not low <= at < high:
                low = at.replace(microsecond=0)
                high = low + _SECOND
                second = low.isoformat(" ")[:19] + "."
            text = f"{second}{at.microsecond:06d}"
            error_code = record.error_code
            first_byte_ms = record.first_byte_ms
            price = record.price
            error_detail = record.error_detail
            values.extend(
                (
                    record.request_id,
                    text,
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
                    NO_VALUE if error_code is None else error_code,
                    NO_VALUE if first_byte_ms is None else first_byte_ms,
                    1 if record.admitted else 0,
                    record.cached_tokens,
                    record.cache_write_tokens,
                    record.request_count,
                    record.search_units,
                    record.key_prefix or NO_VALUE,
                    NO_VALUE if error_detail is None else error_detail,
                    NO_VALUE if price is None else price,
                )
            )
            key_id = record.key_id
            if newest.get(key_id, "") < text:  # one fixed width: sorts in time order
                newest[key_id] = text
            if not record.admitted:
                continue  # a refusal is a request-log line, not usage
            group = (record.group_id, key_id, text[:10], record.model)
            sums = totals.get(group)
            if sums is None:
                sums = totals[group] = [0, 0, 0, 0, 0, 0, 0, 0]  # ROLLUP_TOTALS, in order
            sums[0] += 1
            sums[1] += record.prompt_tokens
            sums[2] += record.completion_tokens
            sums[3] += record.characters
            sums[4] += record.audio_ms
            sums[5] += record.cost_nanos
            sums[6] += record.cached_tokens
            sums[7] += record.cache_write_tokens
        self.values, self.totals, self.newest = values, totals, newest

    def rollups(self) -> list[list[object]]:
        """``usage_daily``'s rows to add: the totals per (group, UTC day, model)."""
        summed: dict[tuple[int, str, str], list[int]] = {}
        for (group_id, _, day, model), sums in self.totals.items():
            _add_to(summed, (group_id, day, model), sums)
        return [[*key, *sums] for key, sums in summed.items()]

    def key_rollups(self) -> list[list[object]]:
        """``usage_daily_keys``' rows to add: the totals per (key, UTC day, model), with
        the key's group (its first record's)."""
        summed: dict[tuple[int, str, str], list[int]] = {}
        groups: dict[tuple[int, str, str], int] = {}
        for (group_id, key_id, day, model), sums in self.totals.items():
            groups.setdefault((key_id, day, model), group_id)
            _add_to(summed, (key_id, day, model), sums)
        return [[*key, groups[key], *sums] for key, sums in summed.items()]


def _add_to(
    summed: dict[tuple[int, str, str], list[int]], key: tuple[int, str, str], sums: list[int]
) -> None:
    known = summed.get(key)
    if known is None:
        summed[key] = list(sums)
    else:
        for index, value in enumerate(sums):
            known[index] += value
