"""The processes that read large request bodies, shared fairly between groups.

Decoding a JSON body and translating it costs time in proportion to its items, and
in the serving process all of it would be event-loop time: every other tenant's calls
wait. A thread does not help: ``orjson`` and the garbage collector hold the GIL for
as long as they run, and a body of a million small items is millions of objects for
the collector to walk again and again. So a body above ``server.large_body_bytes`` is
read in a process of its own, which hands back what the call needs with the bulk
already serialized (a few objects, whatever the body's size).

At most ``processes`` bodies are read at once, and at most ``per_group`` of one
group's: a group that sends many large bodies waits behind its own, never in front of
another group's. When bodies wait, the processes go to their groups in turn (round
robin, one body a turn). The processes start with the first large body (spawned, so
they share nothing with the serving process), and a caller who leaves does not free
its process before the reading is done: the bound holds for the work actually running.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Future
from typing import TYPE_CHECKING, TypeVar, TypeVarTuple

from parley.errors import ServiceUnavailable
from parley.turns import GroupTurns

if TYPE_CHECKING:  # loaded with the first large body: most workers never read one
    from concurrent.futures import ProcessPoolExecutor

Ts = TypeVarTuple("Ts")
T = TypeVar("T")
STOPPING = "The server is shutting down; send the request again."
LOST = "The process reading this request's body stopped; send the request again."


class BodyPool:
    """``await pool.run(group, function, *args)``: ``function(*args)`` in a body process,
    in the group's turn. ``function`` and its arguments and result cross between
    processes (pickled), so they are module-level functions and plain values.

    Each process is a place of its own (``placed``): work that leaves something in its
    process for the next step of the same call (``api/apart.py`` keeps a body it read
    for its translation) asks for that process again, and gets it when it is free."""

    def __init__(self, processes: int, per_group: int) -> None:
        self._turns = GroupTurns(processes, per_group, STOPPING)
        self._executors: list[ProcessPoolExecutor | None] = [None] * processes
        self._free = list(range(processes))

    async def run(self, group: int, function: Callable[[*Ts], T], *args: *Ts) -> T:
        """``function(*args)``, or a 503 when its process died (killed, out of memory)
        or the pool is closed."""
        return (await self.placed(group, None, function, *args))[1]

    async def placed(
        self, group: int, where: int | None, function: Callable[[*Ts], T], *args: *Ts
    ) -> tuple[int, T]:
        """``run``, in the process ``where`` when it is free (else in another), and the
        process it ran in."""
        await self._turns.take(group)
        place = where if where in self._free else self._free[-1]
        self._free.remove(place)
        loop = asyncio.get_running_loop()
        try:
            work: Future[T] = self._submit(place, function, *args)
        except RuntimeError:  # closed meanwhile
            self._release(group, place)
            raise ServiceUnavailable(STOPPING) from None
        work.add_done_callback(self._on_done(loop, group, place))
        try:
            return place, await asyncio.shield(asyncio.wrap_future(work, loop=loop))
        except BrokenExecutor:  # its process died (``BrokenProcessPool``)
            raise ServiceUnavailable(LOST) from None

    @property
    def busy(self) -> int:
        """Processes reading a body now."""
        return self._turns.busy

    def close(self) -> None:
        """Refuse new bodies and stop the processes (the server is stopping)."""
        self._turns.close()
        for executor in self._executors:
            if executor is not None:
                executor.shutdown(wait=False, cancel_futures=True)

    def _submit(self, place: int, function: Callable[[*Ts], T], *args: *Ts) -> Future[T]:
        """``function(*args)`` handed to process ``place``, started again if it died
        (which breaks its executor for good)."""
        executor = self._executors[place]
        if executor is None:
            executor = self._executors[place] = _process()
        try:
            return executor.submit(uncollected, function, args)
        except BrokenExecutor:
            executor.shutdown(wait=False, cancel_futures=True)
            executor = self._executors[place] = _process()
            return executor.submit(uncollected, function, args)

    def _release(self, group: int, place: int) -> None:
        self._free.append(place)
        self._turns.release(group)

    def _on_done(
        self, loop: asyncio.AbstractEventLoop, group: int, place: int
    ) -> Callable[[Future[T]], None]:
        """What the executor calls (on a thread of its own) when a body is read."""

        def done(_: Future[T]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to free
                loop.call_soon_threadsafe(self._release, group, place)

        return done


def uncollected(function: Callable[[*Ts], T], args: tuple[*Ts]) -> T:
    """``function(*args)`` with the cyclic garbage collector paused (in a body process).

    Reading a body builds millions of objects, and each batch of new ones sets the
    collector walking all that live again: about half the reading's time, to find
    nothing, since a body's objects form no cycles and are freed by their counts."""
    gc.disable()
    try:
        return function(*args)
    finally:
        gc.enable()


def _process() -> ProcessPoolExecutor:
    """A body process, spawned: a fresh interpreter shares nothing with the serving one
    (no copy of its heap, its threads' locks or its open sockets). ``multiprocessing``
    loads here, with the first large body."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
