"""Units of work on a SQLite file in plain ``sqlite3``, on threads of their own: what
``SqliteServingStore`` runs its queries with, by the rules ``ThreadedDatabase``
(``database.py``) keeps for SQLAlchemy.

Each unit runs on one of ``pool_size`` threads with a connection of its own, opened with
the same settings as ``engine.py``'s (``plain.SQLITE_PRAGMAS``: the busy timeout, WAL
kept in the file) and kept idle between units. A read runs outside any transaction of
its own (each statement reads what is committed when it runs); a write runs inside
``BEGIN IMMEDIATE`` (the file's write lock, waited for up to the busy timeout), committed
when it returns and rolled back when it raises. A connection that cannot be rolled back
is closed, and the next unit opens a new one. A caller cancelled while its unit runs only
stops waiting: the unit still commits or rolls back and gives its connection back (one
still queued never starts). ``dispose`` closes the idle connections and, when its unit
ends, each one in use (a generation count, as SQLAlchemy's pool does); ``close`` waits
for the units in flight and closes every connection, and closed units refuse more with
``StoreUnavailable``. sqlite3's errors are mapped by ``boundary.database_errors``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, TypeVar

from parley.store.base import StoreUnavailable
from parley.store.boundary import database_errors
from parley.store.plain import SQLITE_BUSY_TIMEOUT_MS, SQLITE_CACHED_STATEMENTS, SQLITE_PRAGMAS

P = ParamSpec("P")
T = TypeVar("T")

Query = Callable[Concatenate[sqlite3.Cursor, P], T]
"""A unit of work: a synchronous function whose first argument is a cursor."""


class SqliteUnits:
    """Units of work on the SQLite file at ``path`` (see the module's docstring)."""

    def __init__(self, path: str, pool_size: int) -> None:
        self._path = path
        self._threads = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="parley-db")
        self._idle: list[sqlite3.Connection] = []
        self._opened: dict[sqlite3.Connection, int] = {}
        """Each open connection, idle or in use, and the generation it was opened in."""
        self._generation = 0
        """Raised by ``dispose``: a connection of an older one is closed when given back."""
        self._lock = threading.Lock()
        self._running: set[Future[Any]] = set()
        self.closed = False

    async def read(self, query: Query[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``query`` on a connection outside any transaction of its own."""
        return await self._run(False, query, args, kwargs)

    async def write(self, query: Query[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``query`` inside ``BEGIN IMMEDIATE``, committed if it returns."""
        return await self._run(True, query, args, kwargs)

    async def dispose(self) -> None:
        """Close every idle connection now, and each one in use when its unit ends."""
        with self._lock:
            self._generation += 1
        await asyncio.wrap_future(self._threads.submit(self._close_connections))

    async def close(self) -> None:
        """Wait for the units in flight, close every connection, take no more; a second
        call does nothing."""
        if self.closed:
            return
        self.closed = True
        try:
            with database_errors():
                if self._running:
                    await asyncio.wait([asyncio.wrap_future(unit) for unit in tuple(self._running)])
                await asyncio.wrap_future(self._threads.submit(self._close_connections))
        finally:
            self._threads.shutdown(wait=False)

    async def _run(
        self, write: bool, query: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> T:
        if self.closed:
            raise StoreUnavailable("the store is closed")
        with database_errors():
            unit = self._threads.submit(self._unit, write, query, args, kwargs)
            self._running.add(unit)
            unit.add_done_callback(self._running.discard)
            # cancelling this await cancels a unit not started; a started one runs to its end
            return await asyncio.wrap_future(unit)

    def _unit(
        self, write: bool, query: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> T:
        """One unit of work, on a store thread: a connection taken from the idle ones (or
        opened), the query run (in a transaction when ``write``), the connection given
        back, or closed if it could not be rolled back."""
        conn = self._connection()
        try:
            result = _in_unit(conn, write, query, args, kwargs)
        except BaseException:
            if _rolled_back(conn):
                self._give_back(conn)
            else:  # the connection is broken: a new one is opened when one is needed
                self._discard(conn)
            raise
        self._give_back(conn)
        return result

    def _connection(self) -> sqlite3.Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        # autocommit mode: a write's transaction is ``_in_unit``'s own BEGIN IMMEDIATE / COMMIT
        conn = sqlite3.connect(
            self._path,
            timeout=SQLITE_BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,  # opened on one of the threads, used on another
            cached_statements=SQLITE_CACHED_STATEMENTS,
        )
        try:
            for pragma in SQLITE_PRAGMAS:
                conn.execute(f"PRAGMA {pragma}")
        except BaseException:
            conn.close()
            raise
        with self._lock:
            self._opened[conn] = self._generation
        return conn

    def _give_back(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if self._opened.get(conn) == self._generation:
                self._idle.append(conn)
                return
        self._discard(conn)  # opened before a ``dispose``

    def _discard(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            self._opened.pop(conn, None)
        conn.close()

    def _close_connections(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            self._discard(conn)


def _in_unit(
    conn: sqlite3.Connection,
    write: bool,
    query: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> T:
    cursor = conn.cursor()
    try:
        if write:
            cursor.execute("BEGIN IMMEDIATE")
        result = query(cursor, *args, **kwargs)
        if write:
            cursor.execute("COMMIT")
        return result
    finally:
        cursor.close()


def _rolled_back(conn: sqlite3.Connection) -> bool:
    """Roll back what a failed unit left open; False when the connection cannot."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        return False
    return True
