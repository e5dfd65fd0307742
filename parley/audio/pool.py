"""The threads that measure uploads, shared fairly between groups.

Measuring decodes the whole clip, so it runs on threads of its own, never the event loop
and never asyncio's default executor (which other work shares). At most ``threads``
clips are measured at once, and at most ``per_group`` of one group's: a group that sends
many clips, or costly ones, waits behind its own and can never hold the threads another
group's clip needs. When clips wait, the threads go to their groups in turn (round robin,
one clip a turn), so a group's place in line does not depend on how many it queued.

A clip whose caller leaves is dropped from the line, or told to stop (its decoding
checks between packets); its thread counts as busy until it has stopped, so the bound
holds for the work actually running.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from parley.audio.budget import DecodeBudget
from parley.audio.errors import ProbeStopped
from parley.audio.info import AudioInfo
from parley.audio.probe import AudioSource, probe
from parley.errors import ServiceUnavailable

STOPPING = "The server is shutting down; send the audio again."


class ProbePool:
    """``await pool.measure(group, file)``: ``probe`` on a thread, in the group's turn."""

    def __init__(self, threads: int, per_group: int, budget: DecodeBudget) -> None:
        self.budget = budget
        self._threads = threads
        self._per_group = max(1, min(per_group, threads))
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="parley-audio")
        self._busy = 0
        self._running: dict[int, int] = {}
        self._waiting: OrderedDict[int, deque[asyncio.Future[None]]] = OrderedDict()
        self._stops: set[threading.Event] = set()
        self._closed = False

    async def measure(self, group: int, file: AudioSource) -> AudioInfo:
        """The clip's ``AudioInfo``; raises what ``probe`` raises, or
        ``ServiceUnavailable`` once the pool is closed."""
        await self._turn(group)
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        self._stops.add(stop)
        try:
            work = self._executor.submit(probe, file, self.budget, stop)
        except RuntimeError:  # closed meanwhile
            self._stops.discard(stop)
            self._release(group)
            raise ServiceUnavailable(STOPPING) from None
        work.add_done_callback(self._on_done(loop, group, stop))
        waiting = asyncio.wrap_future(work, loop=loop)
        try:
            return await asyncio.shield(waiting)
        except ProbeStopped:  # only the pool's closing stops a measurement someone awaits
            raise ServiceUnavailable(STOPPING) from None
        except asyncio.CancelledError:
            stop.set()  # the file is the caller's: let the thread stop reading it first
            with contextlib.suppress(BaseException):
                await asyncio.wait([waiting])
            raise

    def close(self) -> None:
        """Stop every measurement and refuse new ones (the server is stopping)."""
        self._closed = True
        for stop in self._stops:
            stop.set()
        for turns in self._waiting.values():
            for turn in turns:
                if not turn.done():
                    turn.set_exception(ServiceUnavailable(STOPPING))
        self._waiting.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def busy(self) -> int:
        """Threads measuring now (or stopping)."""
        return self._busy

    async def _turn(self, group: int) -> None:
        if self._closed:
            raise ServiceUnavailable(STOPPING)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(group, deque()).append(turn)
        self._start_turns()
        try:
            await turn
        except asyncio.CancelledError:
            granted = turn.done() and not turn.cancelled() and turn.exception() is None
            if granted:  # the thread was the caller's as it left
                self._release(group)
            else:
                self._forget(group, turn)
            raise

    def _start_turns(self) -> None:
        while self._busy < self._threads:
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

    def _on_done(
        self, loop: asyncio.AbstractEventLoop, group: int, stop: threading.Event
    ) -> Callable[[Future[AudioInfo]], None]:
        """What a worker thread calls when its measurement ends: the thread is free."""

        def done(_: Future[AudioInfo]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to free
                loop.call_soon_threadsafe(self._finished, group, stop)

        return done

    def _finished(self, group: int, stop: threading.Event) -> None:
        self._stops.discard(stop)
        self._release(group)

    def _release(self, group: int) -> None:
        self._busy -= 1
        left = self._running[group] - 1
        if left:
            self._running[group] = left
        else:
            del self._running[group]
        if not self._closed:
            self._start_turns()
