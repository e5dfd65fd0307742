"""Whose fault a failed query is, the same on SQLite and PostgreSQL.

A database that is away (refused, locked, too many connections) is ``StoreUnavailable``:
retry later. A database that answered and refused the query (a table a migration has not
made, a constraint other than a unique name) is ``StoreFault``: the same work fails again
until the code or the schema changes. A unique name taken stays ``Conflict``. Each keeps
the driver's first line as its reason, never the statement or its parameters.

The faults are made for real: a table renamed away (a migration missing) and a trigger
that refuses some rows (a constraint Parley does not know).
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from pathlib import Path

import asyncpg
import pytest
import sqlalchemy.exc

from parley.runtime.budget import SpendLedger
from parley.runtime.writer import UsageWriter
from parley.settings import UsageSettings
from parley.store import boundary, engine
from parley.store.base import Conflict, StoreError, StoreFault, StoreUnavailable
from parley.store.sql import SqlStore, open_store
from tests.contract.test_store import (  # noqa: F401
    POSTGRES_URL,
    StoreTarget,
    postgres_execute,
    store,
    store_target,
)
from tests.records import usage_record

PG_REFUSE = """
CREATE FUNCTION refuse_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'refused by the test''s trigger' USING ERRCODE = 'check_violation'; END
$$;
CREATE TRIGGER refuse BEFORE INSERT ON {table} FOR EACH ROW WHEN ({when})
EXECUTE FUNCTION refuse_row();
"""
SQLITE_REFUSE = (
    "CREATE TRIGGER refuse BEFORE INSERT ON {table} WHEN {when}"
    " BEGIN SELECT RAISE(ABORT, 'refused by the test''s trigger'); END"
)


async def run_sql(target: StoreTarget, sql: str) -> None:
    """Run ``sql`` on the target's database beside the store (in the test's schema)."""
    if target.schema is not None:
        await postgres_execute(f'SET search_path TO "{target.schema}";{sql}')
        return
    conn = sqlite3.connect(target.url.removeprefix("sqlite:///"))
    try:
        conn.executescript(sql)
    finally:
        conn.close()


async def refuse_inserts(target: StoreTarget, table: str, when: str) -> None:
    """A trigger that refuses a row of ``table`` where ``when`` holds (of ``NEW``): on
    PostgreSQL as a check violation, on SQLite as ``RAISE(ABORT)``. Both are integrity
    errors to SQLAlchemy, neither a unique one."""
    refuse = PG_REFUSE if target.schema is not None else SQLITE_REFUSE
    await run_sql(target, refuse.format(table=table, when=when))


async def allow_inserts(target: StoreTarget, table: str) -> None:
    on = f" ON {table}" if target.schema is not None else ""
    await run_sql(target, f"DROP TRIGGER refuse{on}")


def assert_one_line(error: StoreError, *hidden: str) -> None:
    text = str(error)
    assert "\n" not in text and "[SQL" not in text and "[parameters" not in text
    for secret in hidden:
        assert secret not in text


async def test_a_table_a_migration_has_not_made_is_a_fault(
    store: SqlStore,  # noqa: F811
    store_target: StoreTarget,  # noqa: F811
) -> None:
    await run_sql(store_target, "ALTER TABLE voice_clones RENAME TO voice_clones_elsewhere")
    with pytest.raises(StoreFault) as raised:
        await store.list_clones()
    assert "voice_clones" in raised.value.reason
    assert_one_line(raised.value, "SELECT")
    assert await store.list_groups() == []  # the database itself is fine


async def test_a_constraint_other_than_unique_is_a_fault_not_a_conflict(
    store: SqlStore,  # noqa: F811
    store_target: StoreTarget,  # noqa: F811
) -> None:
    await refuse_inserts(store_target, "groups", "length(NEW.name) > 8")
    with pytest.raises(StoreFault) as raised:
        await store.create_group("a-long-group-name")
    assert "refused by the test's trigger" in raised.value.reason
    assert_one_line(raised.value, "INSERT", "a-long-group-name")
    await store.create_group("short")
    with pytest.raises(Conflict):  # a unique name taken is still a conflict
        await store.create_group("short")


async def test_the_usage_writer_keeps_records_a_fault_refuses_and_says_so(
    store: SqlStore,  # noqa: F811
    store_target: StoreTarget,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A refused write is not a database away, and the log line says which; the records
    stay queued and are retried (never dropped, no busy loop), and written once the
    cause is gone."""
    await refuse_inserts(store_target, "usage_records", "NEW.model = 'chat-large'")
    settings = UsageSettings(spill_dir=str(tmp_path))
    writer = UsageWriter(store, SpendLedger(store, "month"), settings)
    for number in range(3):
        writer.submit(usage_record(f"r{number}"))
    with caplog.at_level(logging.INFO, logger="parley.meter"):
        assert not await writer.flush()
        assert not await writer.flush()
        assert writer.failing and writer.backlog == 3
        assert writer.next_attempt_seconds > 0
        await allow_inserts(store_target, "usage_records")
        assert await writer.flush()
    assert writer.backlog == 0 and await store.count_usage() == 3
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, "one line when writes start failing, not one per attempt"
    line = errors[0].getMessage()
    assert "the database refused the query" in line and "refused by the test" in line
    assert "unavailable" not in line and "[SQL" not in line and errors[0].exc_info is None
    assert any("written again" in r.getMessage() for r in caplog.records)


async def test_a_locked_sqlite_file_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "parley.db"
    ready = await open_store(f"sqlite:///{path}")
    await ready.migrate()
    await ready.close()
    monkeypatch.setattr(engine, "SQLITE_PRAGMAS", ("busy_timeout = 20", "foreign_keys = ON"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    locked = await open_store(f"sqlite:///{path}")
    try:
        with pytest.raises(StoreUnavailable) as raised:
            await locked.create_group("team")
        assert raised.value.reason == "database is locked"
    finally:
        holder.rollback()
        holder.close()
        await locked.close()


@pytest.mark.postgres
async def test_too_many_connections_on_postgresql_is_unavailable() -> None:
    role = f"r_{secrets.token_hex(6)}"
    try:
        await postgres_execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
    except (OSError, asyncpg.PostgresError) as error:
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL} ({error})")
    limited = await open_store(POSTGRES_URL.replace("postgres@", f"{role}@"))
    try:
        with pytest.raises(StoreUnavailable) as raised:
            await limited.list_groups()
        assert "too many connections" in raised.value.reason
    finally:
        await limited.close()
        await postgres_execute(f"DROP ROLE {role}")


# the classification itself, one driver exception at a time


def wrapped(orig: BaseException, kind: type[sqlalchemy.exc.DBAPIError]) -> BaseException:
    """``orig`` as SQLAlchemy raises it: with the statement and its parameters."""
    return kind("SELECT * FROM keys WHERE digest = ?", ("d1g35t",), orig)


def sqlite_error(tmp_path: Path, sql: str) -> sqlite3.Error:
    conn = sqlite3.connect(tmp_path / "faults.db")
    try:
        conn.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT NOT NULL)")
        conn.execute("INSERT INTO t VALUES (1, 'x')")
        conn.execute(sql)
    except sqlite3.Error as error:
        return error
    finally:
        conn.close()
    raise AssertionError(f"{sql} did not fail")


DRIVER_ERRORS: list[tuple[BaseException, type[StoreError]]] = [
    (ConnectionRefusedError(111, "Connect call failed"), StoreUnavailable),
    (TimeoutError(), StoreUnavailable),
    (sqlalchemy.exc.TimeoutError("QueuePool limit reached"), StoreUnavailable),
    (sqlalchemy.exc.DisconnectionError("gone"), StoreUnavailable),
    (asyncpg.CannotConnectNowError("the database system is starting up"), StoreUnavailable),
    (asyncpg.TooManyConnectionsError("sorry, too many clients already"), StoreUnavailable),
    (asyncpg.ConnectionDoesNotExistError("connection was closed"), StoreUnavailable),
    (asyncpg.AdminShutdownError("terminating connection"), StoreUnavailable),
    (asyncpg.QueryCanceledError("canceling statement due to timeout"), StoreUnavailable),
    (asyncpg.DeadlockDetectedError("deadlock detected"), StoreUnavailable),
    (asyncpg.InterfaceError("connection is closed"), StoreUnavailable),
    (asyncpg.exceptions.InternalClientError("cannot switch to state 11"), StoreUnavailable),
    (asyncpg.UndefinedTableError('relation "keys" does not exist'), StoreFault),
    (asyncpg.UndefinedColumnError('column "x" does not exist'), StoreFault),
    (asyncpg.ForeignKeyViolationError("violates foreign key"), StoreFault),
    (asyncpg.NotNullViolationError("null value"), StoreFault),
    (asyncpg.DataError("invalid input"), StoreFault),
    (asyncpg.UniqueViolationError("duplicate key value"), Conflict),
    (sqlalchemy.exc.ArgumentError("a bug"), StoreFault),
]


@pytest.mark.parametrize(
    ("error", "expected"), DRIVER_ERRORS, ids=[type(e).__name__ for e, _ in DRIVER_ERRORS]
)
def test_each_driver_error_is_sorted_by_whose_fault_it_is(
    error: BaseException, expected: type[StoreError]
) -> None:
    assert type(boundary.store_error(error)) is expected
    if isinstance(error, sqlalchemy.exc.SQLAlchemyError):
        return  # SQLAlchemy's own, never wrapped
    as_sqlalchemy = wrapped(error, sqlalchemy.exc.DBAPIError)
    assert type(boundary.store_error(as_sqlalchemy)) is expected
    assert_one_line(boundary.store_error(as_sqlalchemy), "SELECT", "d1g35t")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM no_such_table", StoreFault),
        ("SELECT no_such_column FROM t", StoreFault),
        ("INSERT INTO t VALUES (2, NULL)", StoreFault),
        ("INSERT INTO t VALUES (1, 'y')", Conflict),
        ("SELEC 1", StoreFault),
    ],
)
def test_sqlite_errors_are_sorted_by_their_code_not_their_class(
    tmp_path: Path, sql: str, expected: type[StoreError]
) -> None:
    """sqlite3 raises ``OperationalError`` for a missing table as for a locked file: the
    result code tells them apart."""
    error = sqlite_error(tmp_path, sql)
    assert type(boundary.store_error(error)) is expected
    kind = (
        sqlalchemy.exc.IntegrityError
        if isinstance(error, sqlite3.IntegrityError)
        else sqlalchemy.exc.OperationalError
    )
    assert type(boundary.store_error(wrapped(error, kind))) is expected


def test_sqlite_busy_unopenable_and_not_a_database_are_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (a)")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        busy = sqlite_error_on(path, "INSERT INTO t VALUES (1)")
    finally:
        holder.rollback()
        holder.close()
    (tmp_path / "junk.db").write_bytes(b"not a database " * 100)
    for error in (
        busy,
        sqlite_error_on(tmp_path / "missing" / "x.db", "SELECT 1"),
        sqlite_error_on(tmp_path / "junk.db", "SELECT * FROM sqlite_master"),
    ):
        mapped = boundary.store_error(wrapped(error, sqlalchemy.exc.OperationalError))
        assert type(mapped) is StoreUnavailable, error


def sqlite_error_on(path: Path, sql: str) -> sqlite3.Error:
    try:
        conn = sqlite3.connect(path, timeout=0)
        try:
            conn.execute(sql)
        finally:
            conn.close()
    except sqlite3.Error as error:
        return error
    raise AssertionError(f"{sql} did not fail on {path}")
