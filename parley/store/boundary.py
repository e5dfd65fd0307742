"""The one place where the database drivers' exceptions become the store's own.

Every ``SqlStore`` method runs its work inside ``database_errors()``: a unique-constraint
violation becomes ``Conflict``, and anything else the database stack raises (SQLAlchemy's
errors, asyncpg's and sqlite3's when they escape SQLAlchemy's wrapping, and ``OSError``,
which is what a refused or reset connection and a connect timeout look like) becomes
``StoreUnavailable``. The store's own ``StoreError`` and everything else (a bug, a
cancellation) pass through untouched.

asyncpg's exceptions are caught once asyncpg is loaded, which only a PostgreSQL database
does: a worker on SQLite never imports it, and cannot meet its exceptions.

The reason kept is the driver's first line, never SQLAlchemy's rendering, which appends
the statement and its parameters (key digests, usage rows).
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from parley.store.base import Conflict, StoreUnavailable

DRIVER_ERRORS: tuple[type[BaseException], ...] = (SQLAlchemyError, sqlite3.Error, OSError)


def driver_errors() -> tuple[type[BaseException], ...]:
    """What becomes ``StoreUnavailable``: asyncpg's errors too once it is loaded (PostgreSQL)."""
    asyncpg = sys.modules.get("asyncpg")
    if asyncpg is None:
        return DRIVER_ERRORS
    return (*DRIVER_ERRORS, asyncpg.PostgresError, asyncpg.InterfaceError)


@contextmanager
def database_errors() -> Iterator[None]:
    """Map the database stack's exceptions raised in the block to the store's."""
    try:
        yield
    except IntegrityError as error:
        raise Conflict(reason(error)) from error
    except driver_errors() as error:
        raise StoreUnavailable(reason(error)) from error


def reason(error: BaseException) -> str:
    """One line saying what went wrong, without SQL or parameters."""
    cause = error.orig if isinstance(error, DBAPIError) and error.orig is not None else error
    text = str(cause).strip().splitlines()
    return text[0] if text else type(cause).__name__
