"""The threads that measure uploads, shared fairly between groups.

Measuring decodes the whole clip, so it runs on threads of its own, never the event loop
and never asyncio's default executor (which other work shares). At most ``threads``
clips are measured at once, and at most ``per_group`` of one group's: a group that sends
many clips, or costly ones, waits behind its own and can never hold the threads another
group's clip needs. When clips wait, the threads go to their groups in turn (round robin,
one clip a turn, ``parley.turns``), so a group's place in line does not depend on how
many it queued.

A clip whose caller leaves is dropped from the line, or told to stop (its decoding
checks between packets); its thread counts as busy until it has stopped, so the bound
holds for the work actually running.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from parley.audio.budget import DecodeBudget
from parley.audio.errors import ProbeStopped
from parley.audio.info import AudioInfo
from parley.audio.probe import AudioSource, probe
from parley.errors import ServiceUnavailable
from parley.turns import GroupTurns

STOPPING = "The server is shutting down; send the audio again."


class ProbePool:
    """``await pool.measure(group, file)``: ``probe`` on a thread, in the group's turn."""

    def __init__(self, threads: int, per_group: int, budget: DecodeBudget) -> None:
        self.budget = budget
        self._turns = GroupTurns(threads, per_group, STOPPING)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="parley-audio")
        self._stops: set[threading.Event] = set()

    async def measure(self, group: int, file: AudioSource) -> AudioInfo:
        """The clip's ``AudioInfo``; raises what ``probe`` raises, or
        ``ServiceUnavailable`` once the pool is closed."""
        await self._turns.take(group)
        loop = asyncio.get_running_loop()
        stop = threading.Event()
        self._stops.add(stop)
        try:
            work = self._executor.submit(probe, file, self.budget, stop)
        except RuntimeError:  # closed meanwhile
            self._stops.discard(stop)
            self._turns.release(group)
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
        self._turns.close()
        for stop in self._stops:
            stop.set()
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def busy(self) -> int:
        """Threads measuring now (or stopping)."""
        return self._turns.busy

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
        self._turns.release(group)
