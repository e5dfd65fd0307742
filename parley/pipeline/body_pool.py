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
import multiprocessing
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import TypeVar, TypeVarTuple

from parley.errors import ServiceUnavailable

Ts = TypeVarTuple("Ts")
T = TypeVar("T")
STOPPING = "The server is shutting down; send the request again."


class GroupTurns:
    """Slots for work, at most ``slots`` at once and ``per_group`` of one group's,
    granted to waiting groups in turn."""

    def __init__(self, slots: int, per_group: int) -> None:
        self._slots = slots
        self._per_group = max(1, min(per_group, slots))
        self._busy = 0
        self._running: dict[int, int] = {}
        self._waiting: OrderedDict[int, deque[asyncio.Future[None]]] = OrderedDict()
        self._closed = False

    @property
    def busy(self) -> int:
        return self._busy

    async def take(self, group: int) -> None:
        """Wait for a slot for ``group``; the caller owes one ``release(group)``."""
        if self._closed:
            raise ServiceUnavailable(STOPPING)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(group, deque()).append(turn)
        self._grant()
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled() and turn.exception() is None:
                self.release(group)  # the slot was the caller's as it left
            else:
                self._forget(group, turn)
            raise

    def release(self, group: int) -> None:
        self._busy -= 1
        left = self._running[group] - 1
        if left:
            self._running[group] = left
        else:
            del self._running[group]
        if not self._closed:
            self._grant()

    def close(self) -> None:
        """Refuse every waiting and later ``take`` (the server is stopping)."""
        self._closed = True
        for turns in self._waiting.values():
            for turn in turns:
                if not turn.done():
                    turn.set_exception(ServiceUnavailable(STOPPING))
        self._waiting.clear()

    def _grant(self) -> None:
        while self._busy < self._slots:
            group = next(
                (g for g in self._waiting if self._running.get(g, 0) < self._per_group), None
            )
            if group is None:
                return
            turns = self._waiting[group]
            turn = turns.popleft()
            if turns:
                self._waiting.move_to_end(group)  # the next turn goes to another group
            else:
                del self._waiting[group]
            if turn.done():
                continue
            self._busy += 1
            self._running[group] = self._running.get(group, 0) + 1
            turn.set_result(None)

    def _forget(self, group: int, turn: asyncio.Future[None]) -> None:
        turns = self._waiting.get(group)
        if turns is not None and turn in turns:
            turns.remove(turn)
            if not turns:
                del self._waiting[group]


class BodyPool:
    """``await pool.run(group, function, *args)``: ``function(*args)`` in a body process,
    in the group's turn. ``function`` and its arguments and result cross between
    processes (pickled), so they are module-level functions and plain values."""

    def __init__(self, processes: int, per_group: int) -> None:
        self._processes = processes
        self._turns = GroupTurns(processes, per_group)
        self._executor: ProcessPoolExecutor | None = None

    async def run(self, group: int, function: Callable[[*Ts], T], *args: *Ts) -> T:
        await self._turns.take(group)
        loop = asyncio.get_running_loop()
        try:
            work: Future[T] = self._pool().submit(function, *args)
        except RuntimeError:  # closed meanwhile
            self._turns.release(group)
            raise ServiceUnavailable(STOPPING) from None
        work.add_done_callback(self._on_done(loop, group))
        return await asyncio.shield(asyncio.wrap_future(work, loop=loop))

    @property
    def busy(self) -> int:
        """Processes reading a body now."""
        return self._turns.busy

    def close(self) -> None:
        """Refuse new bodies and stop the processes (the server is stopping)."""
        self._turns.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            context = multiprocessing.get_context("spawn")
            self._executor = ProcessPoolExecutor(self._processes, mp_context=context)
        return self._executor

    def _on_done(self, loop: asyncio.AbstractEventLoop, group: int) -> Callable[[Future[T]], None]:
        """What the executor calls (on a thread of its own) when a body is read."""

        def done(_: Future[T]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to free
                loop.call_soon_threadsafe(self._turns.release, group)

        return done
