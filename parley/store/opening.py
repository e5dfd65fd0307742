"""``open_store``: the store for the operator's database URL, loading only what it needs.

A SQLite file gets ``SqliteServingStore`` (``sqlite_serving.py``): what a serving worker
calls runs on plain ``sqlite3``, and SQLAlchemy loads only when something else is first
called (the admin API, an upgrade in this process...). A memory database
(``sqlite://``), a SQLite URL with options and PostgreSQL get ``SqlStore``
(``sql.py``), as they always have. This module imports neither SQLAlchemy nor ``sql.py``
until a URL needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from parley.store import usage_sqlite
from parley.store.plain import SQLITE_BUSY_TIMEOUT_MS, SQLITE_PRAGMAS, sqlite_file
from parley.store.sqlite_serving import SqliteServingStore
from parley.store.usage_host import HostUsageClient

if TYPE_CHECKING:
    from parley.store.sql import SqlStore

DEFAULT_TIMEOUT_SECONDS = 10.0
"""The longest a connect or a statement may take before the database counts as away."""


async def open_store(
    url: str,
    *,
    pool_size: int = 5,
    schema: str | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    usage_socket: str | None = None,
) -> SqlStore | SqliteServingStore:
    """A store on the database at ``url`` (not migrated yet: call ``migrate``).

    ``pool_size`` bounds the connections kept open (SQLite files and PostgreSQL; on a
    SQLite file, the plain layer's and, once it is opened, the full store's each).
    ``schema`` (PostgreSQL only) keeps every table, the Alembic version table included,
    in that existing schema: it becomes the connections' ``search_path``. It lets several
    installations, or parallel test runs, share one database. ``timeout_seconds`` bounds a
    connect, a statement (PostgreSQL) and the wait for a pooled connection.
    ``usage_socket`` (a SQLite file only) is the host writer's socket, which usage records
    are written through while it answers (``store/usage_host.py``). On PostgreSQL usage
    records are written on a connection of their own (``store/usage_postgres.py``), one
    more than ``pool_size``.
    """
    path = sqlite_file(url)
    if path is not None and schema is None and usage_sqlite.supported():
        writer = usage_sqlite.SqliteUsageWriter(path, SQLITE_PRAGMAS, SQLITE_BUSY_TIMEOUT_MS / 1000)
        usage = (
            writer
            if usage_socket is None
            else HostUsageClient(usage_socket, writer, timeout_seconds)
        )
        return SqliteServingStore(
            url, path, usage, pool_size=pool_size, timeout_seconds=timeout_seconds
        )
    from parley.store.sql import open_sql_store

    return await open_sql_store(
        url,
        pool_size=pool_size,
        schema=schema,
        timeout_seconds=timeout_seconds,
        usage_socket=usage_socket,
    )
