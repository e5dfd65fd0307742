"""The worker's periodic ``malloc_trim``: found on glibc, called again and again off the
event loop, stopped with the app; after a burst of connections, a sweep first (the edge
server counts how far open connections fell)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import platform
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from parley.edge.protocol import EdgeServer
from parley.edge.refusals import RefusalLog
from parley.heap import (
    BURST_CONNECTIONS,
    AllocatorMissing,
    allocator_environment,
    freed_memory_release,
    give_back_freed_memory,
    jemalloc_purge,
    malloc_trim,
    on_mimalloc,
    sweep,
    trim_periodically,
)

HANG_GUARD = 30.0
"""Not a measurement: only stops a broken loop from hanging the suite."""


def test_glibc_has_malloc_trim() -> None:
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    trim = malloc_trim()
    assert trim is not None
    assert trim() in (0, 1)  # 1: memory was released, 0: there was none to release


def test_pymalloc_and_malloc_on_glibc_are_trimmed() -> None:
    if platform.libc_ver()[0] != "glibc" or os.environ.get("LD_PRELOAD"):
        pytest.skip("malloc_trim is glibc's")
    assert jemalloc_purge() is None
    assert not on_mimalloc()
    release = freed_memory_release()
    assert release is not None
    assert release.__qualname__ == "malloc_trim.<locals>.<lambda>"


PROBE = """
from parley.heap import freed_memory_release, jemalloc_purge, on_mimalloc
purge, release = jemalloc_purge(), freed_memory_release()
print(purge is not None, on_mimalloc(), release and release.__qualname__)
print(purge and purge())
"""


@pytest.mark.parametrize(
    ("allocator", "found"),
    [
        # jemalloc: a purge of every arena instead of malloc_trim, which does nothing there
        ("jemalloc", ["True False jemalloc_purge.<locals>.<lambda>", "0"]),
        # mimalloc: nothing to call (it decommits freed pages by itself)
        ("mimalloc", ["False True None", "None"]),
    ],
)
def test_a_preloaded_allocator_is_released_its_own_way(allocator: str, found: list[str]) -> None:
    try:
        environ = allocator_environment(allocator, os.environ)  # type: ignore[arg-type]
    except AllocatorMissing as error:
        pytest.skip(str(error))
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=environ, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == found


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
    hook = give_back_freed_memory()(app)
    before = len(asyncio.all_tasks())
    await anext(hook)
    started = len(asyncio.all_tasks()) - before
    with pytest.raises(StopAsyncIteration):
        await anext(hook)
    assert started == 1  # trims (glibc) and sweeps after bursts (everywhere)
    assert len(asyncio.all_tasks()) == before


async def test_a_sweep_follows_each_burst_and_only_bursts() -> None:
    falls: Iterator[int] = iter([0, BURST_CONNECTIONS + 44, 10, BURST_CONNECTIONS - 1, 9_000])
    ticks: list[str] = []
    done = asyncio.Event()

    def fell_by() -> int:
        fall = next(falls, None)
        if fall is None:
            done.set()
            return 0
        ticks.append("tick")
        return fall

    task = asyncio.create_task(
        trim_periodically(
            None, seconds=0.001, fell_by=fell_by, after_burst=lambda: ticks.append("sweep")
        )
    )
    await asyncio.wait_for(done.wait(), HANG_GUARD)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ticks == ["tick", "tick", "sweep", "tick", "tick", "tick", "sweep"]


def test_the_sweep_frees_garbage_and_the_method_cache() -> None:
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    gc.collect()
    Cycle()  # unreachable, but alive until a collection finds its cycle
    assert any(type(o) is Cycle for o in gc.get_objects())
    name = "".join(["utc", "offset"])  # a name of its own, as datetime's lookups make
    getattr(Cycle, name, None)  # the method cache keeps a reference to the name
    held = sys.getrefcount(name)
    sweep()
    assert not any(type(o) is Cycle for o in gc.get_objects())
    assert sys.getrefcount(name) < held


class _Transport:
    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


async def test_the_edge_server_counts_how_far_connections_fell() -> None:
    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    server = EdgeServer(handler, refusals=RefusalLog(logging.getLogger("test")))
    assert server.fell_by() == 0
    opened = [server() for _ in range(5)]
    for protocol in opened:
        server.connection_made(protocol, _Transport())  # type: ignore[arg-type]
    for protocol in opened[:3]:
        server.connection_lost(protocol)
    assert server.fell_by() == 3  # from 5 at once down to 2
    assert server.fell_by() == 0  # counted from the 2 open now
    more = [server() for _ in range(2)]
    for protocol in more:
        server.connection_made(protocol, _Transport())  # type: ignore[arg-type]
    assert server.fell_by() == 0  # grew only
