"""The async engine behind ``SqlStore``, and running its migrations.

Operators write plain URLs (``sqlite:///./parley.db``, ``postgresql://...``,
``postgres://...``); the async driver is chosen here. SQLite connections get WAL mode, a
busy timeout (so writers from several processes wait for each other instead of failing)
and foreign keys. On PostgreSQL every connect and every statement is bounded by
``timeout`` seconds, so a hung server (connections accepted, nothing answered) fails a
call with ``StoreUnavailable`` instead of holding it, the usage writer and shutdown for
ever; waiting for a pooled connection is bounded the same way on both.

Migrations run Alembic on a connection of the async engine, under a
lock (``BEGIN IMMEDIATE`` on SQLite, a transaction-scoped advisory lock per schema on
PostgreSQL), so several workers starting at once migrate once.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Connection, event, make_url, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 5000
SQLITE_PRAGMAS = (
    f"busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}",
    "synchronous = NORMAL",
    "foreign_keys = ON",
)
"""Set on every connection. WAL is set once, by ``upgrade_to_head``: it is kept in the file."""
SQLITE_CACHED_STATEMENTS = 0
"""``sqlite3``'s per-connection cache of prepared statements, off. The usage writer's
``INSERT … VALUES (…), (…) … RETURNING`` has one text per batch size, so the default cache
(128 per connection) filled with large statements that were never used again: about
0.75 KB of native memory per call that ``tracemalloc`` could not see, 93 → 135 MB over
52,000 calls (``mallinfo2`` in-use 22 → 61 MB). Uncached, it stays at 22 MB; the hot
path never reads the database, so re-preparing costs nothing that matters."""
POSTGRES_MIGRATION_LOCK = text(
    "SELECT pg_advisory_xact_lock(hashtext('parley.migrate.' || current_schema()))"
)


def async_url(url: str) -> URL:
    """The URL with its async driver: ``sqlite+aiosqlite`` or ``postgresql+asyncpg``."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+asyncpg")
    raise ValueError(f"unsupported database URL scheme `{parsed.drivername}`")


def sqlite_file(url: str) -> str | None:
    """The path of a SQLite file URL without options; None for anything else (memory,
    PostgreSQL, a URL with query options), which keeps SQLAlchemy's usage writer."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.query:
        return None
    if parsed.database in (None, "", ":memory:"):
        return None
    return parsed.database


def create_store_engine(
    url: str, *, pool_size: int, schema: str | None, timeout: float
) -> AsyncEngine:
    target = async_url(url)
    if target.get_backend_name() == "sqlite":
        if schema is not None:
            raise ValueError("a schema can only be chosen on PostgreSQL")
        return _sqlite_engine(target, pool_size, timeout)
    # asyncpg's own bounds: ``timeout`` for connecting, ``command_timeout`` per statement
    connect_args: dict[str, Any] = {"timeout": timeout, "command_timeout": timeout}
    if schema is not None:
        connect_args["server_settings"] = {"search_path": schema}
    return create_async_engine(
        target,
        pool_size=pool_size,
        pool_timeout=timeout,
        pool_pre_ping=True,
        connect_args=connect_args,
    )


def _sqlite_engine(url: URL, pool_size: int, timeout: float) -> AsyncEngine:
    in_memory = url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"
    # a memory database lives in one connection, which SQLAlchemy then keeps (StaticPool)
    options: dict[str, Any] = {} if in_memory else {"pool_size": pool_size, "pool_timeout": timeout}
    connect_args = {"cached_statements": SQLITE_CACHED_STATEMENTS}
    engine = create_async_engine(url, connect_args=connect_args, **options)
    event.listen(engine.sync_engine, "connect", _set_sqlite_pragmas)
    return engine


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        for pragma in SQLITE_PRAGMAS:
            cursor.execute(f"PRAGMA {pragma}")
    finally:
        cursor.close()


async def upgrade_to_head(engine: AsyncEngine) -> None:
    """``alembic upgrade head`` on one connection of ``engine``, in one locked transaction.

    A database already at the head revision is left alone without loading Alembic (one
    ``SELECT``), which keeps the admin commands and start-up quick.
    """
    head = head_revision()
    if head is not None and await _current_revision(engine) == head:
        return
    if engine.dialect.name == "sqlite":
        await _use_wal(engine)
    async with engine.begin() as conn:
        await _lock_for_migration(conn)
        await conn.run_sync(_upgrade)


_REVISION_LINE = re.compile(r"^(down_revision|revision)\b[^=]*=\s*(None|['\"]([^'\"]+)['\"])", re.M)


def head_revision(versions: Path = MIGRATIONS / "versions") -> str | None:
    """The one head of the migration scripts, read from their text without Alembic;
    ``None`` when it is not a plain chain (a merge, a branch), so Alembic decides."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in versions.glob("*.py"):
        found = dict((m.group(1), m.group(3)) for m in _REVISION_LINE.finditer(script.read_text()))
        if "revision" not in found or found["revision"] is None:
            continue
        revisions.add(found["revision"])
        if found.get("down_revision"):
            parents.add(found["down_revision"])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


async def _current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at; ``None`` if it has none yet (or cannot say)."""
    try:
        async with engine.connect() as conn:
            rows = (await conn.exec_driver_sql("SELECT version_num FROM alembic_version")).all()
    except SQLAlchemyError:
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


async def _use_wal(engine: AsyncEngine) -> None:
    """Switch a SQLite file to write-ahead logging (a no-op once it is).

    Switching needs the file to itself, and SQLite refuses at once, without its busy
    wait, while another connection holds it: several workers starting on a new file
    would fail at random. So the switch is retried for up to the busy timeout.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            async with engine.connect() as conn:
                await conn.exec_driver_sql("PRAGMA journal_mode = WAL")
            return
        except OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.05)


async def _lock_for_migration(conn: AsyncConnection) -> None:
    if conn.dialect.name == "sqlite":
        # take the write lock now (waiting up to busy_timeout) so the DDL is transactional
        await conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        await conn.execute(POSTGRES_MIGRATION_LOCK)


def _upgrade(connection: Connection) -> None:
    # Alembic (and Mako under it) load only when a migration runs: the CLI starts faster.
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
