"""Which allocator a worker uses, and giving freed memory back to the system.

**The allocator.** CPython's own small-object allocator (pymalloc) keeps 1 MB arenas and
returns one to the system only when every object in it is gone: after a burst of
thousands of streams, the few objects that outlive it (a cached connection, a key's
bucket) pin most arenas, and RSS stays near its peak. With ``PYTHONMALLOC=malloc``
every object is glibc's, and ``malloc_trim`` below returns whatever pages are free.
It costs CPU on every call, though (about 6 to 20 % per whole reply and 15 to 35 % per stream,
figures in docs/performance.md), so ``parley serve`` keeps pymalloc unless asked:
``--allocator malloc`` is for deployments that see bursts of thousands of streams. The
interpreter reads ``PYTHONMALLOC`` only at start, so ``serve`` then executes itself once
more with it set (``serve_allocator``). A ``PYTHONMALLOC`` already in the environment is
left alone.

**Trimming**, every ``TRIM_SECONDS``, on glibc; after a burst, a sweep first.

glibc keeps what the process freed in its heaps for reuse instead of returning it, so a
burst (thousands of streams open at once) left a worker's resident memory at its peak
for good. ``malloc_trim(0)`` returns every whole free page. It runs in a thread (ctypes
releases the GIL for the call), so the event loop never waits for it; it takes a few
milliseconds. Measured with ``bench.load --slow-streams 3000``: 186 → 160 MB once the
streams had closed. Elsewhere (musl, macOS, Windows) there is nothing to call and this
does nothing.

**After a burst** (``BURST_CONNECTIONS`` fewer connections open than at the most since
the last look), the trim is preceded by a sweep on the event loop (``sweep``): a full
garbage collection, which also empties the interpreter's free lists (up to 2,000 spare
tuples of each small size, floats, lists...), and the interpreter's method cache, which
keeps a reference to the name of each of its 4,096 last lookups (``datetime`` looks up
``"utcoffset"`` with a new string every time). Those objects are few and small, but a
burst's last ones sit in the burst's own 1 MB arenas, and pymalloc gives an arena back
only when nothing in it is alive: 30 s after 6,000 slow streams it took a worker's arenas
from 142 to 105 (35 before the burst; docs/performance.md). It takes a few milliseconds: everything
made at start-up is frozen out of the collector's reach (``cli/serve.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # `parley serve` imports this module before it decides to load aiohttp
    from aiohttp import web

TRIM_SECONDS = 10.0
BURST_CONNECTIONS = 256
"""A burst ended when this many fewer connections are open than at the most since the
trim before (a steady load's open connections move by far less)."""
Allocator = Literal["malloc", "pymalloc"]
ALLOCATOR_VARIABLE = "PYTHONMALLOC"


def serve_allocator(
    wanted: Allocator, environ: Mapping[str, str], argv: Sequence[str]
) -> tuple[str, list[str], dict[str, str]] | None:
    """How to run ``serve`` again under the ``wanted`` allocator: (executable, argv,
    environment) for ``os.execve``, or ``None`` to go on in this process: pymalloc is
    what runs already, the environment chose (``PYTHONMALLOC`` set: also the case once
    executed again), or there is no interpreter to run (embedded) or no exec (Windows)."""
    if wanted == "pymalloc" or ALLOCATOR_VARIABLE in environ:
        return None
    if not sys.executable or not argv or sys.platform == "win32":
        return None
    return sys.executable, [sys.executable, *argv[1:]], {**environ, ALLOCATOR_VARIABLE: wanted}


log = logging.getLogger("parley.heap")


def malloc_trim() -> Callable[[], object] | None:
    """``malloc_trim(0)`` of the C library, or ``None`` where there is none (not glibc)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return lambda: function(0)


def sweep() -> None:
    """Free what a burst left behind that only a full collection frees, and the method
    cache's references (see the module's docstring)."""
    gc.collect()
    clear_type_cache = getattr(sys, "_clear_type_cache", None)  # CPython's
    if clear_type_cache is not None:
        clear_type_cache()


def _never() -> int:
    return 0


async def trim_periodically(
    trim: Callable[[], object] | None,
    seconds: float = TRIM_SECONDS,
    fell_by: Callable[[], int] = _never,
    after_burst: Callable[[], object] = sweep,
) -> None:
    """Every ``seconds``: ``after_burst`` if open connections fell by ``BURST_CONNECTIONS``
    or more (``fell_by``), then ``trim`` in a thread (when there is one)."""
    while True:
        await asyncio.sleep(seconds)
        if fell_by() >= BURST_CONNECTIONS:
            after_burst()
        if trim is not None:
            await asyncio.to_thread(trim)


def give_back_freed_memory(
    fell_by: Callable[[], int] = _never,
) -> Callable[[web.Application], AsyncIterator[None]]:
    """An ``app.cleanup_ctx`` hook: trim periodically while the app runs, sweeping first
    after a burst (``fell_by``: how many fewer connections are open than at the most since
    the last call, e.g. ``EdgeRunner.connections_fell_by``)."""

    async def hook(app: web.Application) -> AsyncIterator[None]:
        trim = malloc_trim()
        if trim is None:
            log.debug("no malloc_trim here (not glibc): freed memory is kept by the allocator")
        task = asyncio.create_task(trim_periodically(trim, fell_by=fell_by))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return hook
