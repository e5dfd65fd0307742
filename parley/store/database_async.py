"""The PostgreSQL ``Database``: SQLAlchemy's async engine on asyncpg.

Each unit of work is a synchronous function run on an ``AsyncConnection`` with
``run_sync`` (SQLAlchemy's greenlet bridge), in a task of its own that the caller awaits
shielded: a cancelled caller stops waiting, and the task still commits or rolls back and
gives its connection back. Only a PostgreSQL database imports this module, and with it
SQLAlchemy's asyncio layer, its ORM and greenlet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from parley.store.base import StoreUnavailable
from parley.store.database import P, Work, pool_checked_out

T = TypeVar("T")


class AsyncDatabase:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._running: set[asyncio.Task[Any]] = set()
        self._closed = False

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    async def transaction(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(self._in_transaction(work, *args, **kwargs))

    async def read(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(self._reading(work, *args, **kwargs))

    def checked_out(self) -> int:
        return pool_checked_out(self._engine.sync_engine)

    async def dispose(self) -> None:
        await self._engine.dispose()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._running:
            await asyncio.wait(self._running)
        await self._engine.dispose()

    async def _in_transaction(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._engine.begin() as conn:
            return await conn.run_sync(work, *args, **kwargs)

    async def _reading(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._engine.connect() as conn:
            return await conn.run_sync(work, *args, **kwargs)

    async def _run(self, unit: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            unit.close()
            raise StoreUnavailable("the store is closed")
        task = asyncio.ensure_future(unit)
        self._running.add(task)
        task.add_done_callback(self._finished)
        return await asyncio.shield(task)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a cancelled caller no longer will
