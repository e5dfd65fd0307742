"""Where ``SqlStore``'s queries run: one contract, two ways to keep the event loop free.

The store's queries are plain synchronous functions on a SQLAlchemy Core ``Connection``
(``keys_sql.py``, ``usage_sql.py``, ``admin_sql.py``, ``voices_sql.py``). A ``Database`` runs
one of them as a unit of work: ``transaction`` in a transaction committed when the
function returns (rolled back when it raises), ``read`` on a connection that commits
nothing. Both return what the function returns and raise what it raises, unchanged
(``boundary.database_errors`` maps those).

- **SQLite** (``ThreadedDatabase``): a synchronous engine on the standard ``sqlite3``
  driver whose work runs on a small pool of threads of its own, one thread per pooled
  connection, never on the event loop's. This is what aiosqlite does underneath, without
  SQLAlchemy's asyncio layer, its ORM (which that layer imports) and greenlet, which a
  worker on SQLite then never loads.
- **PostgreSQL** (``database_async.AsyncDatabase``): SQLAlchemy's async engine on asyncpg,
  which runs the same functions with ``AsyncConnection.run_sync`` (its greenlet bridge).

A caller cancelled while its unit of work runs does not cut it short: the thread (or, on
PostgreSQL, a task of its own) finishes it, commits or rolls back, and gives the
connection back to the pool; the caller only stops waiting (on SQLite, a unit still
queued for a thread when its caller is cancelled never starts). ``close`` waits for the
units in flight, then closes every connection; a closed database refuses new work with
``StoreUnavailable``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy import Connection, Engine

from parley.store.base import StoreUnavailable

P = ParamSpec("P")
T = TypeVar("T")

Work = Callable[Concatenate[Connection, P], T]
"""A unit of work: a synchronous function whose first argument is the connection."""


class Database(Protocol):
    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        ...

    async def transaction(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``work(connection, ...)`` in one transaction, committed if it returns."""
        ...

    async def read(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``work(connection, ...)`` on a connection that commits nothing."""
        ...

    def checked_out(self) -> int:
        """How many connections units of work hold right now: 0 when none runs (and
        always 0 on a memory database, whose one connection the engine keeps)."""
        ...

    async def dispose(self) -> None:
        """Close the pooled connections; the next unit of work opens new ones."""
        ...

    async def close(self) -> None:
        """Wait for the units of work in flight, close every connection, take no more."""
        ...


class ThreadedDatabase:
    """A synchronous engine whose units of work run on ``threads`` threads of its own."""

    def __init__(self, engine: Engine, threads: int) -> None:
        self._engine = engine
        self._threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="parley-db")
        self._running: set[Future[Any]] = set()
        self._closed = False

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    async def transaction(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(_in_transaction, self._engine, work, args, kwargs)

    async def read(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(_reading, self._engine, work, args, kwargs)

    def checked_out(self) -> int:
        return pool_checked_out(self._engine)

    async def dispose(self) -> None:
        await self._run(self._engine.dispose)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._running:
                await asyncio.wait([asyncio.wrap_future(unit) for unit in tuple(self._running)])
            await asyncio.wrap_future(self._threads.submit(self._engine.dispose))
        finally:
            self._threads.shutdown(wait=False)

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        unit = self._threads.submit(function, *args)
        self._running.add(unit)
        unit.add_done_callback(self._running.discard)
        # cancelling this await cancels a unit not started yet; a started one runs to its end
        return await asyncio.wrap_future(unit)


def _in_transaction(
    engine: Engine, work: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> T:
    with engine.begin() as conn:
        return work(conn, *args, **kwargs)


def _reading(
    engine: Engine, work: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> T:
    with engine.connect() as conn:  # rolled back (nothing to undo) when given back
        return work(conn, *args, **kwargs)


def pool_checked_out(engine: Engine) -> int:
    counter = getattr(engine.pool, "checkedout", None)
    return int(counter()) if callable(counter) else 0
