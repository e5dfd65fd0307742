"""The ``Database`` behind ``SqlStore`` (``database.py``), and running its migrations.

Operators write plain URLs (``sqlite:///./parley.db``, ``postgresql://...``,
``postgres://...``); the driver is chosen here: the standard ``sqlite3`` on the store's
own threads for SQLite, asyncpg for PostgreSQL. SQLite connections get WAL mode, a
busy timeout (so writers from several processes wait for each other instead of failing)
and foreign keys. On PostgreSQL every connect and every statement is bounded by
``timeout`` seconds, so a hung server (connections accepted, nothing answered) fails a
call with ``StoreUnavailable`` instead of holding it, the usage writer and shutdown for
ever; waiting for a pooled connection is bounded the same way on both.

Migrations run Alembic on a connection of the database, as one unit of work, under a
lock (``BEGIN IMMEDIATE`` on SQLite, a transaction-scoped advisory lock per schema on
PostgreSQL), so several workers starting at once migrate once.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import URL, Connection, Row, create_engine, event, make_url, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from parley.store.database import Database, ThreadedDatabase
from parley.store.plain import (
    MIGRATIONS,
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_CACHED_STATEMENTS,
    SQLITE_PRAGMAS,
    head_revision,
    sqlite_file,
)

__all__ = [
    "MIGRATIONS",
    "SQLITE_BUSY_TIMEOUT_MS",
    "SQLITE_CACHED_STATEMENTS",
    "SQLITE_PRAGMAS",
    "at_head",
    "driver_url",
    "head_revision",
    "open_database",
    "sqlite_file",
    "upgrade_to_head",
]

POSTGRES_MIGRATION_LOCK = text(
    "SELECT pg_advisory_xact_lock(hashtext('parley.migrate.' || current_schema()))"
)


def driver_url(url: str) -> URL:
    """The URL with its driver: ``sqlite+pysqlite`` (the standard ``sqlite3``, run on the
    store's own threads) or ``postgresql+asyncpg``."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+pysqlite")
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+asyncpg")
    raise ValueError(f"unsupported database URL scheme `{parsed.drivername}`")


def open_database(url: str, *, pool_size: int, schema: str | None, timeout: float) -> Database:
    target = driver_url(url)
    if target.get_backend_name() == "sqlite":
        if schema is not None:
            raise ValueError("a schema can only be chosen on PostgreSQL")
        return _sqlite_database(target, pool_size, timeout)
    # SQLAlchemy's asyncio layer (with its ORM) and greenlet: for PostgreSQL only
    from sqlalchemy.ext.asyncio import create_async_engine

    from parley.store.database_async import AsyncDatabase

    engine = create_async_engine(
        target,
        pool_size=pool_size,
        pool_timeout=timeout,
        pool_pre_ping=True,
        connect_args=_postgres_settings(schema, timeout),
    )
    return AsyncDatabase(engine)


def _postgres_settings(schema: str | None, timeout: float) -> dict[str, Any]:
    """asyncpg's own bounds (``timeout`` for connecting, ``command_timeout`` per
    statement) and the schema as the ``search_path``."""
    settings: dict[str, Any] = {"timeout": timeout, "command_timeout": timeout}
    if schema is not None:
        settings["server_settings"] = {"search_path": schema}
    return settings


def asyncpg_connect_args(url: str, *, schema: str | None, timeout: float) -> dict[str, Any]:
    """``asyncpg.connect``'s arguments for a connection like the store engine's own, to the
    PostgreSQL database at ``url``: the address, user and options as SQLAlchemy's dialect
    reads them from the URL, the timeouts and the schema (``open_database``).

    The URL's ``prepared_statement_cache_size``, SQLAlchemy's own cache (0 behind a pooler
    that cannot keep prepared statements, such as PgBouncer in transaction mode), becomes
    asyncpg's ``statement_cache_size``; ``prepared_statement_name_func`` is SQLAlchemy's
    alone."""
    from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

    dialect: Any = PGDialect_asyncpg()  # type: ignore[no-untyped-call]
    _, options = dialect.create_connect_args(driver_url(url))
    options.pop("prepared_statement_name_func", None)
    if "prepared_statement_cache_size" in options:
        options["statement_cache_size"] = options.pop("prepared_statement_cache_size")
    return {**options, **_postgres_settings(schema, timeout)}


def _sqlite_database(url: URL, pool_size: int, timeout: float) -> ThreadedDatabase:
    in_memory = url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"
    connect_args: dict[str, Any] = {
        "cached_statements": SQLITE_CACHED_STATEMENTS,
        "check_same_thread": False,  # opened on one of the store's threads, used on another
    }
    if in_memory:
        # a memory database lives in one connection, kept (StaticPool) and used by one thread
        engine = create_engine(url, connect_args=connect_args, poolclass=StaticPool)
        threads = 1
    else:
        engine = create_engine(
            url, connect_args=connect_args, pool_size=pool_size, pool_timeout=timeout
        )
        threads = pool_size  # one per connection: a unit of work never waits for the pool
    event.listen(engine, "connect", _set_sqlite_pragmas)
    return ThreadedDatabase(engine, threads)


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        for pragma in SQLITE_PRAGMAS:
            cursor.execute(f"PRAGMA {pragma}")
    finally:
        cursor.close()


async def upgrade_to_head(database: Database) -> None:
    """``alembic upgrade head`` on one connection of ``database``, in one locked transaction.

    A database already at the head revision is left alone without loading Alembic (one
    ``SELECT``), which keeps the admin commands and start-up quick.
    """
    if await at_head(database):
        return
    if database.dialect == "sqlite":
        await database.read(_use_wal)
    await database.transaction(_upgrade)


async def at_head(database: Database) -> bool:
    """Whether ``database`` is at the head revision, read without Alembic (one ``SELECT``);
    False when it is behind, has no revision yet or the scripts have no single head."""
    head = head_revision()
    return head is not None and await _current_revision(database) == head


async def _current_revision(database: Database) -> str | None:
    """The revision the database is at; ``None`` if it has none yet (or cannot say)."""
    try:
        rows = await database.read(_revisions)
    except SQLAlchemyError:
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def _revisions(conn: Connection) -> list[Row[Any]]:
    return list(conn.exec_driver_sql("SELECT version_num FROM alembic_version").all())


def _use_wal(conn: Connection) -> None:
    """Switch a SQLite file to write-ahead logging (a no-op once it is).

    Switching needs the file to itself, and SQLite refuses at once, without its busy
    wait, while another connection holds it: several workers starting on a new file
    would fail at random. So the switch is retried for up to the busy timeout (this runs
    on one of the store's threads, never the event loop's).
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.exec_driver_sql("PRAGMA journal_mode = WAL")
            return
        except OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
        conn.rollback()
        time.sleep(0.05)


def _lock_for_migration(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":
        # take the write lock now (waiting up to busy_timeout) so the DDL is transactional
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        conn.execute(POSTGRES_MIGRATION_LOCK)


def _upgrade(connection: Connection) -> None:
    _lock_for_migration(connection)
    # Alembic (and Mako under it) load only when a migration runs: the CLI starts faster.
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
