"""The SQLite file's own usage writer (``store/usage_sqlite.py``) writes exactly what the
SQLAlchemy path writes: the same rows, in the same text forms, the same rollups and
``last_used_at`` stamps, so both read back alike and a file may switch between them."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from parley.domain.pricing import Price
from parley.domain.usage import UsageRecord
from parley.store import usage_sql, usage_sqlite
from parley.store.base import StoreFault
from parley.store.sql import SqlStore, open_store
from tests.records import usage_record

PRICE = Price(input_per_1k=5, output_per_1k=7)
"""The unit prices one record was billed at: text in a column the other records leave NULL."""
TABLES = (
    "SELECT * FROM usage_records ORDER BY request_id",
    "SELECT * FROM usage_daily ORDER BY group_id, day, model",
    "SELECT id, last_used_at FROM api_keys ORDER BY id",
)


def batches() -> list[list[UsageRecord]]:
    """Odd sizes (cut into several VALUES chunks), zones, a day boundary, an estimated
    record, a duplicate inside a batch and one across batches, an older stamp later, a
    refusal and a line counting many."""
    east = timezone(timedelta(hours=5, minutes=30))
    base = datetime(2024, 3, 9, 23, 59, 59, 999_999, tzinfo=UTC)
    first = [
        replace(
            usage_record(
                f"r{index:04d}",
                created_at=base + timedelta(microseconds=index * 7),
                group_id=1 + index % 2,
                key_id=1 + index % 3,
                model=("a", "b")[index % 2],
                prompt=index,
                completion=2 * index,
                cost=1_000 + index,
            ),
            characters=index % 7,
            audio_ms=3 * index,
        )
        for index in range(301)
    ]
    first.append(first[5])
    zoned = usage_record("z1", created_at=datetime(2024, 3, 10, 1, 0, tzinfo=east), key_id=2)
    naive = usage_record("n1", created_at=datetime(2024, 3, 11, 8, 0), key_id=3)
    estimated = replace(
        usage_record("e1", key_id=1, created_at=base), estimated=True, price=PRICE.tag
    )
    older = usage_record("o1", created_at=datetime(2024, 1, 1, tzinfo=UTC), key_id=1)
    streamed = replace(usage_record("s1", created_at=base), model_requested="b-alias")
    streamed = replace(streamed, first_byte_ms=42, status=502, error_code="bad_gateway")
    refused = replace(
        usage_record("x1", created_at=base, key_id=2, model="", cost=0),
        status=429,
        error_code="rate_limit_exceeded",
        model_requested="a",
        prompt_tokens=0,
        completion_tokens=0,
        admitted=False,
    )
    counted = replace(refused, request_id="x2", request_count=3_990)  # RefusalRows' rest
    return [first, [zoned, naive, first[0], estimated, streamed, refused], [older, counted]]


async def keyed_store(path: Path) -> SqlStore:
    store = await open_store(f"sqlite:///{path}")
    await store.migrate()
    group = await store.create_group("g")
    await store.create_group("h")
    for index in range(3):
        await store.create_key(group.id, name=f"k{index}", digest=f"{index:064d}", prefix="p")
    return store


def dump(path: Path) -> list[list[tuple[object, ...]]]:
    with sqlite3.connect(path) as conn:
        return [conn.execute(query).fetchall() for query in TABLES]


async def test_the_file_writer_writes_what_sqlalchemy_writes(tmp_path: Path) -> None:
    own, reference = tmp_path / "own.db", tmp_path / "reference.db"
    counts: dict[str, list[int]] = {"own": [], "reference": []}
    written = batches()
    store = await keyed_store(own)
    assert store._usage is not None, "a SQLite file should get its own usage writer"
    for batch in written:
        counts["own"].append(await store.record_usage(batch))
    await store.close()
    store = await keyed_store(reference)
    for batch in written:
        counts["reference"].append(await store.database.transaction(usage_sql.record_usage, batch))
    await store.close()

    assert counts["own"] == counts["reference"] == [301, 5, 2]
    assert dump(own) == dump(reference)


async def test_a_batch_failing_half_way_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "parley.db"
    store = await keyed_store(path)
    with sqlite3.connect(path) as conn:  # the rollup, written after the raw rows, fails
        conn.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON usage_daily WHEN NEW.model = 'boom'"
            " BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )
    batch = [usage_record("good"), usage_record("bad", model="boom")]
    with pytest.raises(StoreFault):
        await store.record_usage(batch)
    assert await store.count_usage() == 0
    assert await store.keys_last_used() == {}
    assert await store.record_usage(batch[:1]) == 1
    await store.close()
    await store.close()  # twice: nothing left to close


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///x.db?mode=ro"])
def test_only_plain_files_get_the_writer(url: str) -> None:
    from parley.store.engine import sqlite_file

    assert sqlite_file(url) is None
    assert sqlite_file("sqlite:///./parley.db") == "./parley.db"
    assert sqlite_file("postgresql://u@h/db") is None
    assert usage_sqlite.supported() == (sqlite3.sqlite_version_info >= (3, 33, 0))


async def test_every_statement_runs_on_one_cursor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Connection.execute`` makes a cursor per statement, and the connection keeps a weak
    reference to each until its 200th: made during a burst of calls, those kept the
    burst's memory from being given back. The writer makes one cursor and keeps it."""
    path = tmp_path / "parley.db"
    await (await keyed_store(path)).close()
    made: list[str] = []

    class Counted(sqlite3.Connection):
        def cursor(self, *args: Any, **kwargs: Any) -> Any:
            made.append("cursor")
            return super().cursor(*args, **kwargs)

        def execute(self, *args: Any, **kwargs: Any) -> Any:
            made.append("execute")
            return super().execute(*args, **kwargs)

    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, factory=Counted, **k))
    writer = usage_sqlite.SqliteUsageWriter(str(path), ["busy_timeout = 1000"], timeout=5.0)
    try:
        assert [await writer.record_usage(batch) for batch in batches()] == [301, 5, 2]
    finally:
        await writer.close()
    assert made == ["cursor"]


async def test_new_ids_are_inserted_without_a_lookup_and_stored_ones_found_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of ids not stored yet costs no lookup: the primary key refuses a stored id,
    and only then is the batch looked up and written again without it."""
    path = tmp_path / "parley.db"
    await (await keyed_store(path)).close()
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    writer = usage_sqlite.SqliteUsageWriter(str(path), ["busy_timeout = 1000"], timeout=5.0)
    lookup = usage_sqlite.FIND_STORED.split("?")[0]  # traced with its values in
    try:
        fresh = [usage_record(f"f{index}") for index in range(40)]
        assert await writer.record_usage(fresh) == 40
        assert not [text for text in statements if text.startswith(lookup)]
        again = [usage_record("g1"), fresh[7], usage_record("g2"), usage_record("g1")]
        assert await writer.record_usage(again) == 2
        assert [text for text in statements if text.startswith(lookup)]
    finally:
        await writer.close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT requests FROM usage_daily").fetchall()
    assert rows == [(42,)]


async def test_the_writer_keeps_a_small_page_cache(tmp_path: Path) -> None:
    """SQLite's default cache (2 MiB a connection) filled with the pages the writer wrote:
    about 2 MB more in every worker at steady load. The store's own pragmas stay."""
    path = tmp_path / "parley.db"
    await (await keyed_store(path)).close()
    writer = usage_sqlite.SqliteUsageWriter(str(path), ["busy_timeout = 1234"], timeout=5.0)
    try:
        assert await writer.record_usage(batches()[0]) == 301

        def pragmas() -> tuple[Any, ...]:
            cursor = writer._open()
            return tuple(
                cursor.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("cache_size", "busy_timeout")
            )

        assert await asyncio.get_running_loop().run_in_executor(writer._thread, pragmas) == (
            -512,
            1234,
        )
    finally:
        await writer.close()
