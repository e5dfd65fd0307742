"""PostgreSQL's own usage writer (``store/usage_postgres.py``) writes exactly what the
SQLAlchemy path writes: the same rows and values, the same rollups and ``last_used_at``
stamps, so both read back alike. A batch is all or nothing: refused half way, cut off,
timed out or its caller cancelled, it leaves nothing half-written, and tried again it
counts once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import asyncpg
import orjson
import pytest

from parley.domain.usage import UsageRecord
from parley.store import usage_postgres, usage_sql
from parley.store.base import StoreFault, StoreUnavailable
from parley.store.engine import asyncpg_connect_args
from parley.store.sql import SqlStore, open_store
from parley.store.usage_postgres import PostgresUsageWriter, rows
from tests.contract.test_store import new_postgres_schema, postgres_execute
from tests.contract.test_usage_sqlite import batches
from tests.records import usage_record
from tests.services import POSTGRES_URL

pytestmark = pytest.mark.postgres

TABLES = (
    "SELECT * FROM usage_records ORDER BY request_id",
    "SELECT * FROM usage_daily ORDER BY group_id, day, model",
    "SELECT * FROM usage_daily_keys ORDER BY key_id, day, model",
    "SELECT id, last_used_at FROM api_keys ORDER BY id",
)
SLEEP_ON = """
CREATE FUNCTION sleep_a_while() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep({seconds}); RETURN NEW; END
$$;
CREATE TRIGGER slow BEFORE INSERT ON usage_daily FOR EACH ROW WHEN (NEW.model = 'slow')
EXECUTE FUNCTION sleep_a_while();
"""
"""A trigger that holds a batch with a ``slow`` record inside its statement, after the raw
rows are in, before the rollups are."""


@pytest.fixture
async def schemas() -> AsyncIterator[list[str]]:
    """Schemas of the test's own (``schemas.append(await new_postgres_schema())``),
    dropped at its end."""
    made: list[str] = []
    try:
        yield made
    finally:
        for schema in made:
            await postgres_execute(f'DROP SCHEMA "{schema}" CASCADE')


async def keyed_store(schemas: list[str], **options: Any) -> SqlStore:
    schema = await new_postgres_schema()
    schemas.append(schema)
    store = await open_store(POSTGRES_URL, schema=schema, **options)
    await store.migrate()
    group = await store.create_group("g")
    await store.create_group("h")
    for index in range(3):
        await store.create_key(group.id, name=f"k{index}", digest=f"{index:064d}", prefix="p")
    return store


async def dump(schema: str) -> list[list[tuple[object, ...]]]:
    conn = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": schema})
    try:
        return [[tuple(row) for row in await conn.fetch(query)] for query in TABLES]
    finally:
        await conn.close()


async def run_sql(schema: str, sql: str) -> None:
    await postgres_execute(f'SET search_path TO "{schema}";{sql}')


def writer_of(store: SqlStore) -> PostgresUsageWriter:
    writer = store._usage
    assert isinstance(writer, PostgresUsageWriter), "PostgreSQL should get its own writer"
    return writer


async def test_the_postgres_writer_writes_what_sqlalchemy_writes(schemas: list[str]) -> None:
    counts: dict[str, list[int]] = {"own": [], "reference": []}
    rest = replace(
        usage_record("k1", created_at=datetime(2024, 3, 9, 12, tzinfo=UTC), key_id=3),
        key_prefix="pk-abc",
        error_detail="429: slow down",
        search_units=3,
        cached_tokens=4,
        cache_write_tokens=5,
    )
    written = [*batches(), batches()[0], [rest]]  # the first again: a replayed spill
    store = await keyed_store(schemas)
    writer_of(store)
    for batch in written:
        counts["own"].append(await store.record_usage(batch))
    await store.close()
    store = await keyed_store(schemas)
    for batch in written:
        counts["reference"].append(await store.database.transaction(usage_sql.record_usage, batch))
    await store.close()

    assert counts["own"] == counts["reference"] == [301, 5, 2, 0, 1]
    own, reference = await dump(schemas[0]), await dump(schemas[1])
    assert [len(rows) for rows in own] == [309, 6, 12, 3]
    assert own == reference


async def test_the_first_record_of_an_id_is_kept_and_a_key_stamp_never_goes_back(
    schemas: list[str],
) -> None:
    late, early = datetime(2024, 5, 2, tzinfo=UTC), datetime(2024, 5, 1, tzinfo=UTC)
    first = usage_record("a", created_at=late, cost=10)
    store = await keyed_store(schemas)
    try:
        assert await store.record_usage([first, replace(first, cost_nanos=99), first]) == 1
        assert await store.record_usage([usage_record("b", created_at=early)]) == 1
        assert await store.keys_last_used() == {1: late}
        assert [
            row.cost_nanos for row in await store.daily_usage(1, early.date(), late.date())
        ] == [1_000]
        assert await store.spend_since(early.date()) == {1: 1_010}
    finally:
        await store.close()


async def test_a_batch_failing_half_way_leaves_nothing_behind(schemas: list[str]) -> None:
    store = await keyed_store(schemas)
    await run_sql(
        schemas[0],
        """
        CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'boom' USING ERRCODE = 'check_violation'; END $$;
        CREATE TRIGGER boom BEFORE INSERT ON usage_daily_keys FOR EACH ROW
        WHEN (NEW.model = 'boom') EXECUTE FUNCTION boom();
        """,
    )
    batch = [usage_record("good"), usage_record("bad", model="boom")]
    try:
        with pytest.raises(StoreFault) as raised:
            await store.record_usage(batch)
        assert raised.value.reason == "boom"
        assert await store.count_usage() == 0
        assert await store.keys_last_used() == {}
        assert [rows for rows in await dump(schemas[0])][:3] == [[], [], []]
        assert await store.record_usage(batch[:1]) == 1  # the same connection serves on
    finally:
        await store.close()
        await store.close()  # twice: nothing left to close


async def running_pid(schema: str) -> int:
    """The backend running the writer's statement (held by the ``slow`` trigger)."""
    for _ in range(200):
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            pid = await conn.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep'"
                " AND query LIKE '%INSERT INTO usage_records%'"
            )
        finally:
            await conn.close()
        if pid is not None:
            return int(pid)
        await asyncio.sleep(0.02)
    raise AssertionError("the writer's statement never ran")


async def test_a_connection_lost_mid_batch_keeps_nothing_and_the_batch_counts_once_later(
    schemas: list[str],
) -> None:
    store = await keyed_store(schemas)
    await run_sql(schemas[0], SLEEP_ON.format(seconds=30))
    batch = [usage_record("r1"), usage_record("r2", model="slow"), usage_record("r3", key_id=2)]
    try:
        writing = asyncio.ensure_future(store.record_usage(batch))
        await postgres_execute(f"SELECT pg_terminate_backend({await running_pid(schemas[0])})")
        with pytest.raises(StoreUnavailable):
            await writing
        assert await store.count_usage() == 0
        assert await store.keys_last_used() == {}
        await run_sql(schemas[0], "DROP TRIGGER slow ON usage_daily")
        assert await store.record_usage(batch) == 3  # on a new connection
        assert await store.record_usage(batch) == 0
        daily = (await dump(schemas[0]))[1]
        assert sorted((row[2], row[3]) for row in daily) == [("chat-large", 2), ("slow", 1)]
    finally:
        await store.close()


async def test_a_write_timed_out_in_doubt_counts_once_when_tried_again(
    schemas: list[str],
) -> None:
    """A statement past ``timeout_seconds`` is unavailable, and its connection dropped;
    the server may still commit it. Tried again, the batch adds what was not kept."""
    store = await keyed_store(schemas, timeout_seconds=0.5)
    await run_sql(schemas[0], SLEEP_ON.format(seconds=1.5))
    batch = [usage_record("r1", cost=3), usage_record("r2", model="slow", cost=4)]
    try:
        with pytest.raises(StoreUnavailable):
            await store.record_usage(batch)
        await run_sql(schemas[0], "DROP TRIGGER slow ON usage_daily")
        assert await store.record_usage(batch) in (0, 2)  # 0: the first had been committed
        assert await store.count_usage() == 2
        assert await store.spend_since(datetime.now(UTC).date()) == {1: 7}
    finally:
        await store.close()


async def test_a_cancelled_caller_leaves_the_write_to_finish_and_close_waits_for_it(
    schemas: list[str],
) -> None:
    store = await keyed_store(schemas)
    await run_sql(schemas[0], SLEEP_ON.format(seconds=0.5))
    batch = [usage_record("r1"), usage_record("r2", model="slow")]
    writing = asyncio.ensure_future(store.record_usage(batch))
    await running_pid(schemas[0])
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    await store.close()
    assert len((await dump(schemas[0]))[0]) == 2
    with pytest.raises(StoreUnavailable):
        await store.record_usage(batch)


async def test_one_connection_serves_every_batch_and_is_opened_again_once_closed(
    schemas: list[str],
) -> None:
    store = await keyed_store(schemas)
    writer = writer_of(store)
    try:
        assert await store.record_usage([usage_record("r1")]) == 1
        conn = writer._conn
        assert conn is not None
        assert await store.record_usage([usage_record("r2")]) == 1
        assert writer._conn is conn
        await postgres_execute(f"SELECT pg_terminate_backend({conn.get_server_pid()})")
        for _ in range(200):  # asyncpg sees the close as it comes
            if conn.is_closed():
                break
            await asyncio.sleep(0.01)
        assert await store.record_usage([usage_record("r3")]) == 1
        assert writer._conn is not conn
        assert await store.count_usage() == 3
    finally:
        await store.close()


def test_every_field_of_a_record_is_written_in_its_column() -> None:
    east = timezone(timedelta(hours=5, minutes=30))
    record = replace(
        usage_record("r", created_at=datetime(2024, 3, 11, 8, 0, 0, 7, tzinfo=east)),
        error_code="x",
        price="p",
        first_byte_ms=3,
        estimated=True,
    )
    assert sorted(usage_postgres._NAMES) == sorted(UsageRecord.__dataclass_fields__)
    (row,) = orjson.loads(rows([record]))
    values = dict(zip(usage_postgres._NAMES, row, strict=True))
    assert values.pop("created_at") == "2024-03-11T08:00:00.000007+05:30"
    assert values == {name: getattr(record, name) for name in values}


def test_a_value_json_cannot_hold_is_a_fault() -> None:
    with pytest.raises(StoreFault):
        rows([replace(usage_record("r"), cost_nanos=2**70)])


def test_the_writer_connects_as_the_store_engine_does() -> None:
    url = "postgres://ann:p%40ss@db.internal:5433/bills?ssl=require&prepared_statement_cache_size=0"
    assert asyncpg_connect_args(url, schema="s1", timeout=3.0) == {
        "host": "db.internal",
        "port": 5433,
        "user": "ann",
        "password": "p@ss",
        "database": "bills",
        "ssl": "require",
        "statement_cache_size": 0,  # SQLAlchemy's cache off: asyncpg's too
        "timeout": 3.0,
        "command_timeout": 3.0,
        "server_settings": {"search_path": "s1"},
    }
    writer = PostgresUsageWriter(asyncpg_connect_args(url, schema=None, timeout=1.0), 1.0)
    assert writer._connect["server_settings"] == {"timezone": "UTC"}


async def test_without_kept_statements_the_writer_writes_the_same(schemas: list[str]) -> None:
    schema = await new_postgres_schema()
    schemas.append(schema)
    store = await open_store(f"{POSTGRES_URL}?prepared_statement_cache_size=0", schema=schema)
    try:
        await store.migrate()
        batch = [usage_record("r1"), usage_record("r2")]
        assert [await store.record_usage(batch) for _ in range(3)] == [2, 0, 0]
        assert writer_of(store)._conn is not None
        assert writer_of(store)._conn._stmt_cache.get_max_size() == 0
    finally:
        await store.close()


async def test_writers_racing_over_the_same_records_count_each_once(schemas: list[str]) -> None:
    """Several workers' writers, each given the same records in its own order (replayed
    spills crossing), at once: every id is inserted by one of them and summed once, and
    none deadlocks another (rows are locked in one order)."""
    first = await keyed_store(schemas)
    stores = [first, *[await open_store(POSTGRES_URL, schema=schemas[0]) for _ in range(3)]]
    day = datetime(2024, 6, 1, tzinfo=UTC)

    def records(turn: int) -> list[UsageRecord]:
        return [
            usage_record(
                f"t{turn}-{index:03d}",
                created_at=day + timedelta(seconds=index),
                key_id=1 + index % 3,
                model=("a", "b", "c")[index % 3],
                cost=index,
            )
            for index in range(300)
        ]

    try:
        for number, store in enumerate(stores):  # each writer's connection open
            assert await store.record_usage([usage_record(f"w{number}", created_at=day)]) == 1
        for turn in range(5):
            given = records(turn)
            orders = [given[50 * n :] + given[: 50 * n] for n in range(4)]
            orders[1].reverse()
            written = await asyncio.gather(
                *(store.record_usage(order) for store, order in zip(stores, orders, strict=True))
            )
            assert sum(written) == 300
        assert await first.count_usage() == 4 + 5 * 300
        assert await first.spend_since(day.date()) == {1: 4 * 1_000 + 5 * sum(range(300))}
        rows = await first.daily_usage(1, day.date(), (day + timedelta(days=1)).date())
        assert [(row.model, row.requests) for row in rows] == [
            ("a", 500),
            ("b", 500),
            ("c", 500),
            ("chat-large", 4),
        ]
        assert await first.keys_last_used() == {
            key: day + timedelta(seconds=297 + key - 1) for key in (1, 2, 3)
        }
    finally:
        for store in stores:
            await store.close()
