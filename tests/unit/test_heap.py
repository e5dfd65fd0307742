"""The worker's periodic ``malloc_trim``: found on glibc, called again and again off the
event loop, stopped with the app."""

from __future__ import annotations

import asyncio
import platform
import threading

import pytest
from aiohttp import web

from parley.heap import give_back_freed_memory, malloc_trim, trim_periodically

HANG_GUARD = 30.0
"""Not a measurement: only stops a broken loop from hanging the suite."""


def test_glibc_has_malloc_trim() -> None:
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    trim = malloc_trim()
    assert trim is not None
    assert trim() in (0, 1)  # 1: memory was released, 0: there was none to release


async def test_trims_run_repeatedly_in_another_thread() -> None:
    threads: list[int] = []
    twice = asyncio.Event()
    loop = asyncio.get_running_loop()

    def trim() -> None:
        threads.append(threading.get_ident())
        if len(threads) >= 2:
            loop.call_soon_threadsafe(twice.set)

    task = asyncio.create_task(trim_periodically(trim, seconds=0.01))
    await asyncio.wait_for(twice.wait(), HANG_GUARD)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert threading.get_ident() not in threads


async def test_the_hook_starts_and_stops_with_the_app() -> None:
    app = web.Application()
    hook = give_back_freed_memory(app)
    before = len(asyncio.all_tasks())
    await anext(hook)
    started = len(asyncio.all_tasks()) - before
    with pytest.raises(StopAsyncIteration):
        await anext(hook)
    assert started == (1 if malloc_trim() is not None else 0)
    assert len(asyncio.all_tasks()) == before
