"""The connections to one origin: those idle, how many are open, and who waits for one.

``open`` counts every connection of the origin, idle or carrying a call, and those being
opened; it never passes the client's cap. A call that finds no idle connection and no
room waits in ``waiters`` (oldest first) for either a connection a finished call parks
(handed over directly) or the slot a closed one frees (``None``: open a new one).

An idle connection is closed when its keep-alive runs out, not only when a later call
finds it expired: one timer per pool (``_reaper``) is set for the oldest idle
connection's expiry, closes what expired when it fires, and is set again while
connections stay idle. So a burst's connections (up to ``max_idle`` of them) are gone
a keep-alive after it, with their buffers and the heap pages they held, even when no
call to that origin follows.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from parley.http.connection import Connection

Handed = Connection | None
"""What a waiter is given: an idle connection, or ``None`` for a slot to connect in."""


REAP_SLACK = 0.05
"""Seconds after the oldest expiry that the reaper fires, so it finds it expired."""


class Pool:
    __slots__ = ("_clock", "_reaper", "idle", "open", "waiters")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.idle: deque[Connection] = deque()
        self.open = 0
        self.waiters: deque[asyncio.Future[Handed]] = deque()
        self._clock = clock
        self._reaper: asyncio.TimerHandle | None = None

    def take_idle(self, now: float) -> Connection | None:
        """The most recently parked connection still usable; dead ones are closed."""
        idle = self.idle
        while idle:
            connection = idle.pop()
            if connection.usable(now):
                return connection
            connection.close()
            self.open -= 1
        return None

    def hand_over(self, handed: Handed) -> bool:
        """Give a connection or a free slot to the oldest waiter; ``False`` if none waits."""
        waiters = self.waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(handed)
                return True
        return False

    def free_slot(self) -> None:
        """A connection of this origin closed: its slot goes to a waiter, or is freed."""
        if not self.hand_over(None):
            self.open -= 1

    def park(self, connection: Connection, max_idle: int, now: float) -> None:
        """Keep ``connection`` idle (or hand it to a waiter); close what is over the
        idle bound, and the oldest idle connection if it expired."""
        if self.hand_over(connection):
            return
        idle = self.idle
        idle.append(connection)
        oldest = idle[0]
        if len(idle) > max_idle or oldest.closed or now >= oldest.expires:
            idle.popleft().close()
            self.open -= 1
        if self._reaper is None and idle:
            self._arm(now)

    def _arm(self, now: float) -> None:
        """Fire at the soonest expiry of an idle connection (on the client's clock)."""
        soonest = min(connection.expires for connection in self.idle)
        delay = max(0.0, soonest - now) + REAP_SLACK
        self._reaper = asyncio.get_running_loop().call_later(delay, self._reap)

    def _reap(self) -> None:
        """Close the idle connections that expired (or died); keep watching the rest."""
        self._reaper = None
        now = self._clock()
        kept = [c for c in self.idle if not c.closed and now < c.expires]
        for connection in self.idle:
            if connection.closed or now >= connection.expires:
                connection.close()
                self.free_slot()
        self.idle = deque(kept)
        if kept:
            self._arm(now)

    def close(self, error: Exception) -> None:
        """Close every idle connection; every waiting call fails with ``error``."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for connection in self.idle:
            connection.close()
        self.open -= len(self.idle)
        self.idle.clear()
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)
