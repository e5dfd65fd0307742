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

**Trimming**, every ``TRIM_SECONDS``, on glibc.

glibc keeps what the process freed in its heaps for reuse instead of returning it, so a
burst (thousands of streams open at once) left a worker's resident memory at its peak
for good. ``malloc_trim(0)`` returns every whole free page. It runs in a thread (ctypes
releases the GIL for the call), so the event loop never waits for it; it takes a few
milliseconds. Measured with ``bench.load --slow-streams 3000``: 186 → 160 MB once the
streams had closed. Elsewhere (musl, macOS, Windows) there is nothing to call and this
does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # `parley serve` imports this module before it decides to load aiohttp
    from aiohttp import web

TRIM_SECONDS = 10.0
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


async def trim_periodically(trim: Callable[[], object], seconds: float = TRIM_SECONDS) -> None:
    while True:
        await asyncio.sleep(seconds)
        await asyncio.to_thread(trim)


async def give_back_freed_memory(app: web.Application) -> AsyncIterator[None]:
    """An ``app.cleanup_ctx`` hook: trim periodically while the app runs."""
    trim = malloc_trim()
    task = asyncio.create_task(trim_periodically(trim)) if trim is not None else None
    if trim is None:
        log.debug("no malloc_trim here (not glibc): freed memory is kept by the allocator")
    yield
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
