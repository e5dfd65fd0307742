"""Usage records survive a database that is gone at shutdown: spilled, then replayed.

The database is a PostgreSQL database of the test's own, dropped ``WITH (FORCE)`` (which
closes every connection to it) to play the outage, and created again to play recovery.
First the ``UsageWriter`` in-process, then the same story through ``parley serve``. And
the opposite: a healthy database must never see a spill because shutdown cut off a write.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest

from parley.domain.usage import UsageRecord
from parley.runtime.budget import SpendLedger
from parley.runtime.writer import UsageWriter
from parley.settings import UsageSettings
from parley.store.base import Store
from parley.store.sql import SqlStore, open_store
from tests.process.calls import Chat, burst, gateway_config
from tests.process.conftest import PostgresDatabase
from tests.process.procs import Processes, usage_count
from tests.records import usage_record

RECORDS = 40


def spill_files(directory: Path) -> list[Path]:
    """Spill files, and files being replayed (``*.replaying-<pid>``)."""
    return sorted(directory.glob("parley-usage-spill-*"))


def record(number: int) -> UsageRecord:
    return usage_record(f"req-{number}", prompt=3, completion=5)


async def migrated(database: PostgresDatabase) -> SqlStore:
    store = await open_store(database.url)
    await store.migrate()
    return store


def writer_for(store: Store, spill_dir: Path, flush_seconds: float = 30) -> UsageWriter:
    settings = UsageSettings(flush_seconds=flush_seconds, spill_dir=str(spill_dir))
    return UsageWriter(store, SpendLedger(store, "month"), settings)


@pytest.mark.postgres
async def test_the_writer_spills_when_the_database_is_gone_and_replays_at_start(
    postgres_db: PostgresDatabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = await migrated(postgres_db)
    writer = writer_for(store, tmp_path)
    await writer.start()
    for number in range(RECORDS):
        writer.submit(record(number))
    await postgres_db.adrop()

    with caplog.at_level(logging.ERROR, logger="parley.meter"):
        await writer.close()
    await store.close()

    assert writer.backlog == 0
    (spill,) = spill_files(tmp_path)
    assert spill.suffix == ".jsonl"
    assert len(spill.read_bytes().splitlines()) == RECORDS
    assert f"database unreachable at shutdown: {RECORDS} usage records kept in" in caplog.text
    kept = tmp_path / "kept.jsonl"
    shutil.copy(spill, kept)

    await postgres_db.acreate()
    store = await migrated(postgres_db)
    try:
        replaying = writer_for(store, tmp_path)
        await replaying.start()
        await replaying.close()
        assert await store.count_usage() == RECORDS
        assert replaying.written == RECORDS
        assert not spill_files(tmp_path)

        # A crash between the write and the unlink replays the file again: no double count.
        kept.rename(spill)
        again = writer_for(store, tmp_path)
        await again.start()
        await again.close()
        assert await store.count_usage() == RECORDS
        assert not spill_files(tmp_path)
    finally:
        await store.close()


@pytest.mark.postgres
def test_serve_spills_at_sigterm_without_a_database_and_replays_at_restart(
    procs: Processes, engine: str, tmp_path: Path, postgres_db: PostgresDatabase
) -> None:
    config = gateway_config(
        engine, tmp_path, database_url=postgres_db.url, usage={"flush_seconds": 30}
    )
    server = procs.serve(config, wait=False)
    key = server.create_key()
    server.wait_ready()
    replies = burst([Chat(server.v1, key, stream=i % 2 == 0) for i in range(10)])
    assert [r.status for r in replies] == [200] * 10

    postgres_db.drop()
    assert server.terminate() == 0
    (spill,) = spill_files(tmp_path)
    assert spill.suffix == ".jsonl"
    assert len(spill.read_bytes().splitlines()) == 10
    assert "database unreachable at shutdown: 10 usage records kept in" in server.output()

    postgres_db.create()
    restarted = procs.serve(config, name="restarted")  # migrates, then replays the spill
    assert "replayed 10 spilled usage records" in restarted.output()
    assert not spill_files(tmp_path)
    assert restarted.terminate() == 0
    assert usage_count(postgres_db.url) == 10


class SlowWrites:
    """A store whose writes wait for ``release``, and which counts cancelled writes."""

    def __init__(self, inner: SqlStore) -> None:
        self.inner = inner
        self.writing = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = 0

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        self.writing.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return await self.inner.record_usage(records)


async def test_closing_the_writer_lets_a_write_in_progress_finish(tmp_path: Path) -> None:
    """Cancelling a SQLite write mid-transaction kept the database locked for seconds, so
    the final flush failed and a healthy database's records were spilled."""
    store = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
    await store.migrate()
    slow = SlowWrites(store)
    writer = writer_for(cast(Store, slow), tmp_path, flush_seconds=0.01)
    try:
        await writer.start()
        for number in range(RECORDS):
            writer.submit(record(number))
        await asyncio.wait_for(slow.writing.wait(), timeout=5)  # the loop is writing

        closing = asyncio.create_task(writer.close())
        await asyncio.sleep(0.1)
        assert not closing.done()  # it waits for the write instead of cutting it off
        slow.release.set()
        await asyncio.wait_for(closing, timeout=5)

        assert slow.cancelled == 0
        assert await store.count_usage() == RECORDS
        assert not spill_files(tmp_path)
    finally:
        await store.close()


async def test_closing_the_writer_with_a_bound_spills_a_write_that_does_not_end(
    tmp_path: Path,
) -> None:
    """A hung database holds a write until its timeout; a bounded close stops waiting for
    it and spills every record not known to be written, the batch in flight included."""
    store = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
    await store.migrate()
    slow = SlowWrites(store)
    writer = writer_for(cast(Store, slow), tmp_path, flush_seconds=0.01)
    try:
        await writer.start()
        for number in range(RECORDS):
            writer.submit(record(number))
        await asyncio.wait_for(slow.writing.wait(), timeout=5)  # the loop is writing

        await asyncio.wait_for(writer.close(0.2), timeout=5)  # never released

        assert writer.backlog == 0
        (spill,) = spill_files(tmp_path)
        assert len(spill.read_bytes().splitlines()) == RECORDS
        assert await store.count_usage() == 0
    finally:
        await store.close()
