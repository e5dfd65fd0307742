"""The one place where the database drivers' exceptions become the store's own.

Every ``SqlStore`` method runs its work inside ``database_errors()``, which sorts what the
database stack raises (SQLAlchemy's errors, asyncpg's and sqlite3's when they escape
SQLAlchemy's wrapping, and ``OSError``) by whose fault it is:

* a unique-constraint violation is ``Conflict`` (a name or an id is taken);
* a failure of the connection or of the database itself is ``StoreUnavailable``: a
  refused, reset or timed-out connection (``OSError``), SQLAlchemy's disconnects and
  pool timeouts, asyncpg's connection errors (its protocol out of step, as a connection
  lost mid-message leaves it, included) and the server's SQLSTATE classes that say it
  cannot take the work now (connection exceptions, too many connections and other
  insufficient resources, shutdown, cannot connect now, a cancelled statement, a
  deadlock), sqlite3's busy, locked, unopenable, unreadable or full file;
* anything else is ``StoreFault``: the database answered and refused the query (an
  unknown table or column, a constraint other than unique, a bad value, a bug).

The first two are decided by the driver's own exception, reached through SQLAlchemy's
``orig``: sqlite3's extended result code and PostgreSQL's SQLSTATE say more than the
exception's class (sqlite3 raises ``OperationalError`` both for a locked file and for a
missing table). The store's own ``StoreError`` and everything else (a bug in Parley, a
cancellation) pass through untouched.

SQLAlchemy's exceptions are caught once SQLAlchemy is loaded, and asyncpg's once asyncpg
is, which only a PostgreSQL database does: a worker serving on a SQLite file imports
neither (``sqlite_serving.py`` runs its queries on ``sqlite3`` and maps its errors here,
the same way), and cannot meet their exceptions.

The reason kept is the driver's first line, never SQLAlchemy's rendering, which appends
the statement and its parameters (key digests, usage rows).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from parley.store.base import Conflict, StoreError, StoreFault, StoreUnavailable

DRIVER_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
"""What ``database_errors`` maps in every process: sqlite3's errors and ``OSError``;
SQLAlchemy's and asyncpg's are added once they are loaded (``driver_errors``)."""

SQLITE_UNAVAILABLE = frozenset(
    {
        3,  # SQLITE_PERM: access to the file denied
        5,  # SQLITE_BUSY: another connection holds the lock past the busy timeout
        6,  # SQLITE_LOCKED
        7,  # SQLITE_NOMEM
        8,  # SQLITE_READONLY: the file (or its directory) cannot be written
        9,  # SQLITE_INTERRUPT
        10,  # SQLITE_IOERR
        11,  # SQLITE_CORRUPT
        13,  # SQLITE_FULL: the disk is full
        14,  # SQLITE_CANTOPEN
        15,  # SQLITE_PROTOCOL: the file's locking failed
        26,  # SQLITE_NOTADB: the file is not a database
    }
)
"""sqlite3's primary result codes (an extended code's low byte) that are the file's or the
machine's state, not the query's."""
SQLITE_UNIQUE = frozenset({1555, 2067})
"""SQLITE_CONSTRAINT_PRIMARYKEY and SQLITE_CONSTRAINT_UNIQUE."""

POSTGRES_UNAVAILABLE_CLASSES = frozenset({"08", "28", "3D", "53", "57", "58"})
"""SQLSTATE classes of the connection and the server, not the query: connection exception,
invalid authorization, unknown database, insufficient resources (too many connections,
disk full, out of memory), operator intervention (shutdown, cannot connect now, a
statement cancelled by ``statement_timeout``) and system error."""
POSTGRES_UNAVAILABLE = frozenset({"40001", "40P01", "55P03"})
"""Serialization failure, deadlock, lock not available: the same work may succeed later."""
POSTGRES_UNIQUE = "23505"


def driver_errors() -> tuple[type[BaseException], ...]:
    """What ``database_errors`` maps: SQLAlchemy's errors too once it is loaded (any
    store but a worker's on a SQLite file, ``sqlite_serving.py``), and asyncpg's once it
    is (PostgreSQL)."""
    errors = DRIVER_ERRORS
    sqlalchemy = _sqlalchemy()
    if sqlalchemy is not None:
        errors = (*errors, sqlalchemy.SQLAlchemyError)
    asyncpg = sys.modules.get("asyncpg")
    if asyncpg is None:
        return errors
    return (
        *errors,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.exceptions.InternalClientError,
    )


def _sqlalchemy() -> ModuleType | None:
    """``sqlalchemy.exc`` if it is loaded: a process that has not loaded SQLAlchemy cannot
    meet its exceptions, and this module never loads it."""
    return sys.modules.get("sqlalchemy.exc")


@contextmanager
def database_errors() -> Iterator[None]:
    """Map the database stack's exceptions raised in the block to the store's."""
    try:
        yield
    except driver_errors() as error:
        raise store_error(error) from error


def store_error(error: BaseException) -> StoreError:
    """``Conflict``, ``StoreUnavailable`` or ``StoreFault`` for a driver's ``error``."""
    if unique_violation(error):
        return Conflict(reason(error))
    if unavailable(error):
        return StoreUnavailable(reason(error))
    return StoreFault(reason(error))


def unique_violation(error: BaseException) -> bool:
    """Whether ``error`` is a unique (or primary key) constraint refusing a duplicate."""
    cause = _cause(error)
    if isinstance(cause, sqlite3.IntegrityError):
        return getattr(cause, "sqlite_errorcode", None) in SQLITE_UNIQUE
    return getattr(cause, "sqlstate", None) == POSTGRES_UNIQUE


def unavailable(error: BaseException) -> bool:
    """Whether ``error`` is the connection's or the database's state, not the query's."""
    if isinstance(error, OSError):
        return True
    sqlalchemy = _sqlalchemy()
    if sqlalchemy is not None:
        if isinstance(error, sqlalchemy.DisconnectionError | sqlalchemy.TimeoutError):
            return True  # a dropped connection, or the pool's wait timed out
        if isinstance(error, sqlalchemy.DBAPIError) and error.connection_invalidated:
            return True
    cause = _cause(error)
    if isinstance(cause, OSError):  # a connect that failed under SQLAlchemy's wrapping
        return True
    if isinstance(cause, sqlite3.Error):
        return _sqlite_unavailable(cause)
    sqlstate = getattr(cause, "sqlstate", None)
    if isinstance(sqlstate, str):
        return sqlstate[:2] in POSTGRES_UNAVAILABLE_CLASSES or sqlstate in POSTGRES_UNAVAILABLE
    if _asyncpg_client_error(cause):  # "connection is closed", and its kin
        return True
    return sqlalchemy is not None and isinstance(
        error, sqlalchemy.OperationalError | sqlalchemy.InterfaceError
    )


def _sqlite_unavailable(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in SQLITE_UNAVAILABLE
    return isinstance(error, sqlite3.OperationalError)


def _asyncpg_client_error(error: BaseException) -> bool:
    """asyncpg's own errors of the connection: an interface error ("connection is
    closed") or its protocol out of step, as a connection lost mid-message leaves it
    ("cannot switch to state …; another operation is in progress")."""
    asyncpg = sys.modules.get("asyncpg")
    return asyncpg is not None and isinstance(
        error, asyncpg.InterfaceError | asyncpg.exceptions.InternalClientError
    )


def _cause(error: BaseException) -> BaseException:
    """The driver's own exception, under SQLAlchemy's wrapping (asyncpg's adapter keeps
    its SQLSTATE)."""
    sqlalchemy = _sqlalchemy()
    if sqlalchemy is None or not isinstance(error, sqlalchemy.DBAPIError):
        return error
    orig: BaseException | None = error.orig
    return orig if orig is not None else error


def reason(error: BaseException) -> str:
    """One line saying what went wrong, without SQL or parameters."""
    cause = _cause(error)
    text = str(cause).strip().splitlines()
    return text[0] if text else type(cause).__name__
