"""``migrate(apart=True)``: a database another process can open (a SQLite file,
PostgreSQL) that is behind is upgraded by a short-lived child process; a memory database
is upgraded in this one. The URL never reaches the child's command line, and a failing
child is the same one-line error as a failing in-process upgrade: ``StoreUnavailable``
when the database is away, ``StoreFault`` when it refused the migration."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from parley.store import migrate_apart
from parley.store.base import StoreFault, StoreUnavailable
from parley.store.engine import head_revision
from parley.store.sql import open_store
from tests.contract.test_store import POSTGRES_URL, new_postgres_schema, postgres_execute


class Started(list[tuple[Any, ...]]):
    """Each process started: its command line, then the ``Process``."""

    def __init__(self) -> None:
        super().__init__()
        self.one = asyncio.Event()


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> Iterator[Started]:
    """The command line of every process started, recorded."""
    started = Started()
    real = asyncio.create_subprocess_exec

    async def recording(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        process = await real(*args, **kwargs)
        started.append((*args, process))
        started.one.set()
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recording)
    yield started


def _version(path: Path) -> list[tuple[str]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT version_num FROM alembic_version").fetchall()


async def test_a_fresh_sqlite_file_is_migrated_by_a_child(
    tmp_path: Path, children: list[tuple[Any, ...]]
) -> None:
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    store = await open_store(url)
    try:
        await store.migrate(apart=True)
        assert await store.list_groups() == []
        await store.migrate(apart=True)  # at head now: no child
    finally:
        await store.close()
    assert len(children) == 1
    assert not any(url in str(arg) or "parley.db" in str(arg) for arg in children[0][:-1])
    assert _version(tmp_path / "parley.db") == [(head_revision(),)]


async def test_workers_starting_together_migrate_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    stores = [await open_store(url) for _ in range(3)]
    try:
        await asyncio.gather(*(store.migrate(apart=True) for store in stores))
    finally:
        for store in stores:
            await store.close()
    assert _version(tmp_path / "parley.db") == [(head_revision(),)]


async def test_a_cancelled_caller_kills_the_child(tmp_path: Path, children: Started) -> None:
    """The child waits for the write lock another connection holds; the caller gives up:
    the child is killed (its transaction never began), the file is left as it was."""
    path = tmp_path / "parley.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    store = await open_store(f"sqlite:///{path}")
    try:
        migrating = asyncio.ensure_future(store.migrate(apart=True))
        await children.one.wait()
        migrating.cancel()
        with pytest.raises(asyncio.CancelledError):
            await migrating
        assert children[0][-1].returncode is not None
    finally:
        holder.rollback()
        holder.close()
        await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT name FROM sqlite_master").fetchall() == []


async def test_a_memory_database_is_migrated_in_this_process(
    children: list[tuple[Any, ...]],
) -> None:
    store = await open_store("sqlite://")
    try:
        await store.migrate(apart=True)
        assert await store.list_groups() == []
    finally:
        await store.close()
    assert children == []


async def test_a_file_that_cannot_be_opened_is_the_same_one_line_error(
    tmp_path: Path, children: list[tuple[Any, ...]]
) -> None:
    url = f"sqlite:///{tmp_path / 'missing' / 'parley.db'}"
    reasons = []
    for apart in (False, True):
        store = await open_store(url)
        try:
            with pytest.raises(StoreUnavailable) as raised:
                await store.migrate(apart=apart)
        finally:
            await store.close()
        reasons.append(raised.value.reason)
    assert reasons[0] == reasons[1] == "unable to open database file"
    assert len(children) == 1  # the second, in the child: the probe here found no revision


async def test_an_unreachable_postgresql_is_one_line_without_the_password(
    children: list[tuple[Any, ...]],
) -> None:
    url = "postgresql://postgres:hunter2-secret@127.0.0.1:9/test"
    store = await open_store(url, timeout_seconds=3)
    try:
        with pytest.raises(StoreUnavailable) as raised:
            await store.migrate(apart=True)
    finally:
        await store.close()
    reason = raised.value.reason
    assert "\n" not in reason and "hunter2" not in reason and reason
    assert all("hunter2" not in str(arg) for child in children for arg in child)


@pytest.mark.postgres
async def test_a_child_failing_on_postgresql_is_one_line(children: list[tuple[Any, ...]]) -> None:
    """The revision probe here finds no table; the child cannot create one in a schema
    that does not exist, and says why in one line: the database is up and refused the
    statement, a fault, as the same upgrade in this process says."""
    await postgres_execute(f'DROP SCHEMA "{await new_postgres_schema()}"')  # or skip
    faults = []
    for apart in (True, False):
        store = await open_store(POSTGRES_URL, schema="t_no_such_schema")
        try:
            with pytest.raises(StoreFault) as raised:
                await store.migrate(apart=apart)
        finally:
            await store.close()
        faults.append(raised.value.reason)
    assert len(children) == 1
    assert faults[0] == faults[1]
    assert "schema" in faults[0] and "\n" not in faults[0]
    assert "SELECT" not in faults[0] and "CREATE" not in faults[0]


async def test_a_child_that_says_nothing_fails_with_its_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(migrate_apart, "CHILD_MODULE", "parley.store.no_such_module")
    store = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
    try:
        with pytest.raises(StoreUnavailable, match=r"migration process failed \(exit status 1\)"):
            await store.migrate(apart=True)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_postgresql_is_migrated_by_a_child_in_its_schema(
    children: list[tuple[Any, ...]],
) -> None:
    schema = await new_postgres_schema()
    try:
        store = await open_store(POSTGRES_URL, schema=schema)
        try:
            await store.migrate(apart=True)
            assert await store.list_groups() == []
        finally:
            await store.close()
        assert len(children) == 1
        assert not any("postgres" in str(arg) for arg in children[0][1:-1])
        connection = await asyncpg.connect(POSTGRES_URL)
        try:
            table = f'"{schema}".alembic_version'
            version = await connection.fetchval(f"SELECT version_num FROM {table}")
        finally:
            await connection.close()
        assert version == head_revision()
    finally:
        await postgres_execute(f'DROP SCHEMA "{schema}" CASCADE')
