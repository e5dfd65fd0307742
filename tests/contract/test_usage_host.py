"""The host's one usage writer (``store/usage_host.py``): a store opened with its socket
writes through it exactly what its own writer writes, maps its failures as its own, and
writes directly, each record once, when the host writer is missing, gone or stuck."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from parley.store import usage_host, usage_sqlite
from parley.store.base import StoreFault
from parley.store.engine import SQLITE_PRAGMAS
from parley.store.sql import SqlStore, open_store
from tests.contract.test_usage_sqlite import batches, dump, keyed_store
from tests.records import usage_record

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def host_writer(path: Path, socket: Path) -> AsyncIterator[usage_host.HostWriter]:
    """The host writer's server on ``socket``, in this event loop."""
    host = usage_host.HostWriter(usage_sqlite.SqliteUsageWriter(str(path), SQLITE_PRAGMAS, 5.0))
    server = await asyncio.start_unix_server(host.handle, path=str(socket))
    try:
        yield host
    finally:
        server.close()
        await host.finish(5.0)


@asynccontextmanager
async def fake_host(socket: Path, handler: Handler) -> AsyncIterator[None]:
    server = await asyncio.start_unix_server(handler, path=str(socket))
    try:
        yield
    finally:
        server.close()


async def through(path: Path, socket: Path, seconds: float = 10.0) -> SqlStore:
    """A store on ``path`` writing through ``socket``; ``seconds`` is its timeout."""
    await (await keyed_store(path)).close()
    return await open_store(f"sqlite:///{path}", usage_socket=str(socket), timeout_seconds=seconds)


def client(store: SqlStore) -> usage_host.HostUsageClient:
    usage = store._usage
    assert isinstance(usage, usage_host.HostUsageClient)
    return usage


async def test_through_the_host_writer_the_file_holds_what_its_own_writer_writes(
    tmp_path: Path,
) -> None:
    own, hosted, socket = tmp_path / "own.db", tmp_path / "hosted.db", tmp_path / "w.sock"
    store = await keyed_store(own)
    own_counts = [await store.record_usage(batch) for batch in batches()]
    await store.close()
    async with host_writer(hosted, socket):
        store = await through(hosted, socket)
        hosted_counts = [await store.record_usage(batch) for batch in batches()]
        assert client(store).through_host == 3
        await store.close()
    assert own_counts == hosted_counts == [301, 5, 2]
    assert dump(hosted) == dump(own)


async def test_a_write_the_host_writer_fails_fails_as_the_workers_own_would(
    tmp_path: Path,
) -> None:
    path, socket = tmp_path / "parley.db", tmp_path / "w.sock"
    async with host_writer(path, socket):
        store = await through(path, socket)
        with sqlite3.connect(path) as conn:
            conn.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON usage_daily WHEN NEW.model = 'boom'"
                " BEGIN SELECT RAISE(ABORT, 'boom'); END"
            )
        batch = [usage_record("good"), usage_record("bad", model="boom")]
        with pytest.raises(StoreFault, match="boom"):
            await store.record_usage(batch)
        assert await store.count_usage() == 0
        assert await store.record_usage(batch[:1]) == 1  # the connection is still good
        assert client(store).through_host == 1
        await store.close()


async def test_without_a_host_writer_a_worker_writes_its_own_then_returns_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(usage_host, "RETRY_SECONDS", 0.0)
    caplog.set_level(logging.INFO, "parley.meter")
    path, socket = tmp_path / "parley.db", tmp_path / "w.sock"
    store = await through(path, socket)
    assert await store.record_usage([usage_record("a")]) == 1  # nothing listens yet
    assert await store.record_usage([usage_record("a2")]) == 1
    assert client(store).through_host == 0
    warned = [r for r in caplog.records if "writes its own" in r.getMessage()]
    assert len(warned) == 1, "one warning an outage, not one a batch"
    async with host_writer(path, socket):
        assert await store.record_usage([usage_record("b")]) == 1
        assert client(store).through_host == 1
    assert await store.record_usage([usage_record("c")]) == 1  # gone again
    assert client(store).through_host == 1
    assert await store.count_usage() == 4
    assert "answers again" in caplog.text
    await store.close()


async def test_an_answer_lost_after_the_commit_still_counts_each_record_once(
    tmp_path: Path,
) -> None:
    """The host writer commits the batch and its answer never comes (it died): the worker
    writes the batch itself, and the store keeps each record once."""
    path, socket = tmp_path / "parley.db", tmp_path / "w.sock"
    writer = usage_sqlite.SqliteUsageWriter(str(path), SQLITE_PRAGMAS, 5.0)

    async def commit_then_hang_up(reader: asyncio.StreamReader, out: asyncio.StreamWriter) -> None:
        size = int.from_bytes(await reader.readexactly(4), "big")
        await writer.record_usage(usage_host.decode(await reader.readexactly(size)))
        out.close()

    store = await through(path, socket)
    batch = [usage_record(f"r{index}") for index in range(20)]
    async with fake_host(socket, commit_then_hang_up):
        assert await store.record_usage(batch) == 0  # written directly: all were there
    await writer.close()
    assert await store.count_usage() == 20
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT sum(requests) FROM usage_daily").fetchone() == (20,)
    await store.close()


async def test_a_host_writer_that_never_answers_is_given_up_after_the_timeout(
    tmp_path: Path,
) -> None:
    path, socket = tmp_path / "parley.db", tmp_path / "w.sock"
    stuck = asyncio.Event()

    async def never_answer(reader: asyncio.StreamReader, out: asyncio.StreamWriter) -> None:
        await stuck.wait()
        out.close()

    store = await through(path, socket, seconds=0.3)
    async with fake_host(socket, never_answer):
        began = asyncio.get_running_loop().time()
        assert await store.record_usage([usage_record("a"), usage_record("b")]) == 2
        assert asyncio.get_running_loop().time() - began < 3.0
        assert client(store).through_host == 0
        stuck.set()
    assert await store.count_usage() == 2
    await store.close()


def test_a_batch_goes_over_the_socket_and_back_unchanged() -> None:
    records = [record for batch in batches() for record in batch]
    frame = usage_host.encode(records)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    decoded = usage_host.decode(frame[4:])
    assert decoded == records
    assert [record.created_at for record in decoded] == [record.created_at for record in records]
