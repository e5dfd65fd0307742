"""Migrating in a short-lived child process, so the serving process never loads Alembic.

Alembic, with Mako and every SQLAlchemy dialect it imports, is memory that a process
keeps for the rest of its life once it has loaded them. A worker
started on a database already at the newest revision never loads them
(``engine.upgrade_to_head`` reads the revision with one ``SELECT``); one started on a
database that is behind (every fresh install) would keep them for nothing. So ``parley
serve`` and ``Services.start`` have the upgrade run by a child, ``python -m
parley.store.migrate_apart``, and wait for it (``asyncio``'s subprocess API, so the event
loop stays free). The child runs exactly the in-process upgrade
(``engine.upgrade_to_head``: the WAL switch, ``BEGIN IMMEDIATE`` on SQLite, the advisory
lock on PostgreSQL, the schema as ``search_path``, the same timeouts), so several workers
starting together still migrate once.

Only a database another process can open is migrated apart: a SQLite file or PostgreSQL.
A memory database exists only in this process, so it is migrated here. Starting the
child loads nothing of SQLAlchemy here (``run_child``): a worker on a SQLite file has
not loaded it (``sqlite_serving.py``), and its upgrade must not load it either.

The database URL (a PostgreSQL one carries its password) goes to the child on its
standard input, never on its command line, which any user can read in ``ps``. The child
answers with one JSON line on its standard output: nothing when it succeeds, else
``{"reason": ..., "fault": ...}``, the one line the store's error would carry (the
driver's first line: no URL, no SQL, no parameters) and whether the database refused the
migration's statements rather than being away. A failure becomes ``StoreFault`` or
``StoreUnavailable`` here, as the in-process upgrade's does. A caller cancelled while
the child runs kills it: the upgrade is one transaction, so the database is left as it
was.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from parley.store.base import StoreError, StoreFault, StoreUnavailable
from parley.store.boundary import database_errors
from parley.store.boundary import reason as first_line

if TYPE_CHECKING:
    from parley.store.database import Database

CHILD_MODULE = "parley.store.migrate_apart"


@dataclass(frozen=True)
class Target:
    """What the child needs to open the database as ``open_store`` did."""

    url: str
    schema: str | None
    timeout: float


def shareable(url: str) -> bool:
    """Whether another process can open this database: not a SQLite memory database."""
    from sqlalchemy import make_url  # what opens a ``SqlStore`` has loaded it

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return True
    return parsed.database not in (None, "", ":memory:") and parsed.query.get("mode") != "memory"


async def upgrade_apart(database: Database, target: Target) -> None:
    """Bring ``database`` to the newest revision, by a child process if it is behind."""
    from parley.store.engine import at_head

    if await at_head(database):
        return
    await run_child(target)


async def run_child(target: Target) -> None:
    """Run the upgrade in a child process and wait for it; ``StoreFault`` if the database
    refused the migration, ``StoreUnavailable`` for any other failure."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        CHILD_MODULE,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=_child_environment(),
    )
    setup = json.dumps(asdict(target)).encode() + b"\n"
    try:
        answer, _ = await child.communicate(setup)
    except BaseException:  # cancelled: the child's transaction rolls back when it dies
        if child.returncode is None:
            child.kill()
            await child.wait()
        raise
    if child.returncode != 0:
        reason, fault = _reason(answer, child.returncode)
        raise StoreFault(reason) if fault else StoreUnavailable(reason)


def _child_environment() -> dict[str, str]:
    """This process's environment, with its import path, so the child imports the same
    Parley (a checkout on ``sys.path``, not only an installed one)."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
    return environment


def _reason(answer: bytes, code: int | None) -> tuple[str, bool]:
    """The child's reason, and whether it was a fault (the database refused the work)."""
    # A child that could not say why (it crashed): its stderr is not relayed, as a
    # traceback may quote SQL, so the operator is pointed at the in-process upgrade.
    crashed = (
        f"the migration process failed (exit status {code}); "
        "`parley db upgrade` runs the same upgrade in the foreground and shows why"
    )
    try:
        said = json.loads(answer.decode().strip().splitlines()[-1])
        reason, fault = said["reason"], said.get("fault") is True
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        return crashed, False
    return (str(reason), fault) if reason else (crashed, False)


async def _upgrade(target: Target) -> None:
    """The in-process upgrade, on the database as ``open_store`` opened it."""
    from parley.store.engine import open_database, upgrade_to_head

    database = open_database(target.url, pool_size=1, schema=target.schema, timeout=target.timeout)
    try:
        with database_errors():
            await upgrade_to_head(database)
    finally:
        with database_errors():
            await database.close()


def main() -> int:
    """The child: read the target from stdin, upgrade, answer on stdout; the exit status."""
    try:
        target = Target(**json.loads(sys.stdin.readline()))
        asyncio.run(_upgrade(target))
    except (StoreUnavailable, StoreFault) as error:
        reason, fault = error.reason, isinstance(error, StoreFault)
    except StoreError as error:
        reason, fault = str(error), True
    except Exception as error:  # an Alembic error (an unknown revision): its first line
        reason, fault = f"migration failed: {first_line(error)}", True
    else:
        return 0
    print(json.dumps({"reason": reason, "fault": fault}), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
