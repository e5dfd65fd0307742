"""A store call whose caller is cancelled, and closing the store with calls in flight, on
SQLite and PostgreSQL: the unit of work already running finishes (commits or rolls back)
and gives its connection back, so the pool stays usable and no transaction is left open;
``close`` waits for it."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import asyncpg
import pytest

from parley.store.base import StoreUnavailable
from parley.store.sql import SqlStore, open_store
from tests.contract.test_store import POSTGRES_URL, StoreTarget, store_target  # noqa: F401


@asynccontextmanager
async def writes_held(target: StoreTarget, *, wait: bool = True) -> AsyncIterator[None]:
    """Hold the write lock on the ``groups`` table from outside the store; with
    ``wait=False``, fail at once if anyone else holds a lock on it."""
    if target.schema is None:
        path = str(target.url.removeprefix("sqlite:///"))
        conn = sqlite3.connect(path, timeout=5 if wait else 0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()
        return
    pg = await asyncpg.connect(POSTGRES_URL)
    try:
        async with pg.transaction():
            mode = "ACCESS EXCLUSIVE MODE" if wait else "ACCESS EXCLUSIVE MODE NOWAIT"
            await pg.execute(f'LOCK TABLE "{target.schema}".groups IN {mode}')
            yield
    finally:
        await pg.close()


async def until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition`` (a bound, not a timing: 10 s is far more than it takes)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


async def migrated(target: StoreTarget, pool_size: int) -> SqlStore:
    store = await open_store(target.url, schema=target.schema, pool_size=pool_size)
    await store.migrate()
    return store


async def test_a_cancelled_call_finishes_its_work_and_gives_its_connection_back(
    store_target: StoreTarget,  # noqa: F811
) -> None:
    store = await migrated(store_target, pool_size=1)
    try:
        async with writes_held(store_target):
            call = asyncio.create_task(store.create_group("cancelled"))
            await until(lambda: store.database.checked_out() == 1)  # waiting for the lock
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        # the lock is released: the unit of work ends by itself and returns its connection
        await until(lambda: store.database.checked_out() == 0)
        assert [group.name for group in await store.list_groups()] == ["cancelled"]
        await store.create_group("next")
        assert store.database.checked_out() == 0
        async with writes_held(store_target, wait=False):
            pass  # nobody holds a lock on the table: no transaction was left open
    finally:
        await store.close()


async def test_close_waits_for_the_work_in_flight_then_refuses_more(
    store_target: StoreTarget,  # noqa: F811
) -> None:
    store = await migrated(store_target, pool_size=5)  # closing has threads to spare
    async with writes_held(store_target):
        call = asyncio.create_task(store.create_group("in-flight"))
        await until(lambda: store.database.checked_out() == 1)
        closing = asyncio.create_task(store.close())
        await asyncio.sleep(0.1)
        assert not closing.done()  # still waiting for the unit of work the lock holds
    await closing
    assert (await call).name == "in-flight"
    with pytest.raises(StoreUnavailable):
        await store.list_groups()
    reopened = await store_target.open()
    try:
        assert [group.name for group in await reopened.list_groups()] == ["in-flight"]
    finally:
        await reopened.close()
