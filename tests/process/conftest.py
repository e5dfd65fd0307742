"""Fixtures for process-level tests: a process registry, a fake engine, a fresh database.

Every process a test starts is killed at teardown, whatever the outcome. A PostgreSQL
test gets a database of its own (``parley_t_<hex>``), dropped afterwards: a subprocess
``parley serve`` only takes a URL, so a schema cannot isolate it.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.process.procs import Processes
from tests.services import POSTGRES_URL, postgres_database

POSTGRES_ADMIN_URL = POSTGRES_URL


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    processes = Processes(tmp_path)
    try:
        yield processes
    finally:
        processes.stop_all()


@pytest.fixture
def engine(procs: Processes) -> str:
    """A fake OpenAI-compatible engine in its own process; its ``/v1`` base URL."""
    return procs.engine()


async def postgres_execute(sql: str) -> None:
    connection = await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=5)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


class PostgresDatabase:
    """A database of the test's own; drop it and create it again to simulate an outage.

    ``create``/``drop`` are for synchronous code, ``acreate``/``adrop`` for async tests.
    """

    def __init__(self) -> None:
        self.name = f"parley_t_{secrets.token_hex(6)}"
        self.url = postgres_database(self.name)

    async def acreate(self) -> None:
        await postgres_execute(f'CREATE DATABASE "{self.name}"')

    async def adrop(self) -> None:
        """Drop it, closing every connection to it (``WITH (FORCE)``)."""
        await postgres_execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def create(self) -> None:
        asyncio.run(self.acreate())

    def drop(self) -> None:
        asyncio.run(self.adrop())


@pytest.fixture
def postgres_db() -> Iterator[PostgresDatabase]:
    database = PostgresDatabase()
    try:
        database.create()
    except (OSError, asyncpg.PostgresError) as error:
        pytest.skip(f"no PostgreSQL at {POSTGRES_ADMIN_URL} ({error})")
    try:
        yield database
    finally:
        database.drop()
