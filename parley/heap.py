"""Which allocator a worker uses, and giving freed memory back to the system.

**The allocator.** CPython's own small-object allocator (pymalloc) returns a 1 MB arena to
the system only when every object in it is gone, so after a burst of thousands of
streams the few objects that outlive it (spares on C extensions' free lists, metric
values, timers) pin most arenas and the worker stays near its peak. With
``PYTHONMALLOC=malloc`` every object comes from ``malloc``, which gives freed pages back:
glibc's (``--allocator malloc``), or jemalloc or mimalloc preloaded into the process
(``--allocator jemalloc|mimalloc``: ``LD_PRELOAD`` names the library, found in the usual
folders or by the dynamic linker; Debian's packages are ``libjemalloc2`` and
``libmimalloc2.0``). jemalloc is the one choice that keeps a worker small both at steady
load and after a burst at no cost in CPU time that shows, so ``parley serve`` runs on it
by default (``auto``) where its library is installed, and on pymalloc where it is not;
``--allocator`` chooses any of them (docs/operations.md compares them). The interpreter
reads ``PYTHONMALLOC`` (and the dynamic linker ``LD_PRELOAD``) only at start, so
``serve`` executes itself once more with them set (``serve_allocator``); workers and
children inherit them. A ``PYTHONMALLOC`` already in the environment is left alone.

**Trimming**, every ``TRIM_SECONDS``; after a burst, a sweep first. glibc keeps what the
process freed in its heaps for reuse, so ``malloc_trim(0)`` returns every whole free
page. It runs in a thread (ctypes releases the GIL for the call), so the event loop never
waits for it. On jemalloc (where ``malloc_trim`` does nothing) the trim purges every
arena's dirty pages, which jemalloc would otherwise return only slowly as the process
allocates. mimalloc decommits freed pages by itself, so nothing is called. Elsewhere
(musl, macOS, Windows) there is nothing to call and this does nothing.

**After a burst** (``BURST_CONNECTIONS`` fewer connections open than at the most since
the last look), the trim is preceded by a sweep on the event loop (``sweep``): a full
garbage collection, which also empties the interpreter's free lists (spare tuples of each
small size, floats, lists...), and the interpreter's method cache, which keeps a
reference to the name of each of its last lookups (``datetime`` looks up ``"utcoffset"``
with a new string every time). Those objects are few and small, but a burst's last ones
sit in the burst's own arenas, and pymalloc gives an arena back only when nothing in it
is alive. The sweep is short: everything made at start-up is frozen out of the
collector's reach (``cli/serve.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # `parley serve` imports this module before it decides to load aiohttp
    from aiohttp import web

TRIM_SECONDS = 10.0
BURST_CONNECTIONS = 256
"""A burst ended when this many fewer connections are open than at the most since the
trim before (a steady load's open connections move by far less)."""
Allocator = Literal["auto", "pymalloc", "malloc", "jemalloc", "mimalloc"]
ALLOCATORS: tuple[Allocator, ...] = ("auto", "pymalloc", "malloc", "jemalloc", "mimalloc")
ALLOCATOR_VARIABLE = "PYTHONMALLOC"
PRELOAD_VARIABLE = "LD_PRELOAD"


@dataclass(frozen=True)
class Library:
    """A ``malloc`` to preload: its file's name (soname), its name for
    ``ctypes.util.find_library``, and the Debian package that installs it."""

    soname: str
    name: str
    package: str


LIBRARIES: dict[str, Library] = {
    "jemalloc": Library("libjemalloc.so.2", "jemalloc", "libjemalloc2"),
    "mimalloc": Library("libmimalloc.so.2", "mimalloc", "libmimalloc2.0"),
}


class AllocatorMissing(Exception):
    """The allocator asked for cannot be used here (its library is not installed)."""


def library_folders() -> list[str]:
    """Where Debian and most other distributions install shared libraries."""
    multiarch = getattr(sys.implementation, "_multiarch", None)  # "x86_64-linux-gnu"
    folders = [f"/usr/lib/{multiarch}"] if multiarch else []
    return [*folders, "/usr/lib64", "/usr/lib", "/usr/local/lib"]


def library_path(
    wanted: str,
    folders: Sequence[str] | None = None,
    search: Callable[[str], str | None] = ctypes.util.find_library,
) -> str:
    """The file to preload for ``wanted`` (a key of ``LIBRARIES``): found in the usual
    folders, else by the dynamic linker's cache (``search``); ``AllocatorMissing`` says
    which package to install."""
    library = LIBRARIES[wanted]
    if not sys.platform.startswith("linux"):
        raise AllocatorMissing(f"--allocator {wanted} needs Linux (it preloads {library.soname})")
    for folder in library_folders() if folders is None else folders:
        path = os.path.join(folder, library.soname)
        if os.path.isfile(path):
            return path
    found = search(library.name)
    if found:
        return found
    raise AllocatorMissing(
        f"--allocator {wanted}: {library.soname} is not installed "
        f"(Debian, Ubuntu: apt-get install {library.package})"
    )


def resolved(wanted: Allocator, find: Callable[[str], str] = library_path) -> Allocator:
    """``auto`` (the default) is jemalloc where its library is installed, else pymalloc;
    any other choice is itself."""
    if wanted != "auto":
        return wanted
    try:
        find("jemalloc")
    except AllocatorMissing:
        return "pymalloc"
    return "jemalloc"


def allocator_environment(
    wanted: Allocator, environ: Mapping[str, str], find: Callable[[str], str] = library_path
) -> dict[str, str]:
    """``environ`` with what makes a new interpreter allocate with ``wanted``: every
    object from ``malloc`` (``PYTHONMALLOC=malloc``), and for jemalloc and mimalloc
    their library first in ``LD_PRELOAD`` (whatever was preloaded already stays, after
    it; a library already there is not added twice)."""
    changed = dict(environ)
    wanted = resolved(wanted, find)
    if wanted == "pymalloc":
        return changed
    changed[ALLOCATOR_VARIABLE] = "malloc"
    if wanted in LIBRARIES:
        path = find(wanted)
        preloaded = environ.get(PRELOAD_VARIABLE, "").replace(":", " ").split()
        if path not in preloaded:
            changed[PRELOAD_VARIABLE] = " ".join([path, *preloaded])
    return changed


def serve_allocator(
    wanted: Allocator,
    environ: Mapping[str, str],
    argv: Sequence[str],
    find: Callable[[str], str] = library_path,
) -> tuple[str, list[str], dict[str, str]] | None:
    """How to run ``serve`` again under the ``wanted`` allocator: (executable, argv,
    environment) for ``os.execve``, or ``None`` to go on in this process: pymalloc is
    what runs already, the environment chose (``PYTHONMALLOC`` set: also the case once
    executed again), or there is no interpreter to run (embedded) or no exec (Windows).
    ``AllocatorMissing`` if the library of jemalloc or mimalloc, asked for by name,
    cannot be found."""
    if ALLOCATOR_VARIABLE in environ or not sys.executable or not argv:
        return None
    if sys.platform == "win32":
        return None
    environment = allocator_environment(wanted, environ, find)
    if ALLOCATOR_VARIABLE not in environment:
        return None  # pymalloc, what runs already
    return sys.executable, [sys.executable, *argv[1:]], environment


def running_allocator(environ: Mapping[str, str]) -> str:
    """The allocator this process was started on, as ``--allocator`` names it (read from
    the environment ``serve_allocator`` set, or the operator's own ``PYTHONMALLOC``)."""
    chosen = environ.get(ALLOCATOR_VARIABLE, "pymalloc")
    if chosen != "malloc":
        return chosen
    preloaded = environ.get(PRELOAD_VARIABLE, "")
    for name, library in LIBRARIES.items():
        if library.soname in preloaded:
            return name
    return "malloc"


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


JEMALLOC_PURGE_ALL = b"arena.4096.purge"
"""``mallctl`` name that purges every arena's unused dirty pages (4096 is
``MALLCTL_ARENAS_ALL``)."""


def jemalloc_purge() -> Callable[[], object] | None:
    """A purge of every jemalloc arena when jemalloc is this process's ``malloc``
    (preloaded: ``--allocator jemalloc``), else ``None``."""
    mallctl = _exported("mallctl")
    if mallctl is None:
        return None
    mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p]
    mallctl.argtypes += [ctypes.c_void_p, ctypes.c_size_t]
    mallctl.restype = ctypes.c_int
    return lambda: mallctl(JEMALLOC_PURGE_ALL, None, None, None, 0)


def _exported(symbol: str) -> Any:
    """A C function this process has loaded (ctypes' wrapper), or ``None``."""
    try:
        return getattr(ctypes.CDLL(None), symbol)
    except (OSError, AttributeError):
        return None


def on_mimalloc() -> bool:
    """Whether mimalloc is this process's ``malloc`` (``--allocator mimalloc``)."""
    return _exported("mi_version") is not None


def freed_memory_release() -> Callable[[], object] | None:
    """What gives freed pages back for the allocator this process runs on: jemalloc's
    purge, nothing for mimalloc (it decommits freed pages itself), else glibc's
    ``malloc_trim`` (see the module's docstring)."""
    purge = jemalloc_purge()
    if purge is not None:
        return purge
    if on_mimalloc():
        return None
    return malloc_trim()


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
        trim = freed_memory_release()
        if trim is None:
            log.debug("nothing to trim on this allocator (mimalloc, or not glibc)")
        task = asyncio.create_task(trim_periodically(trim, fell_by=fell_by))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return hook
