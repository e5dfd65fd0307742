"""The connections to one origin: those idle, how many are open, and who waits for one.

The pool owns that state; the client asks it (``take_idle``, ``claim``, ``wait_for``)
and tells it (``park``, ``free_slot``), and never edits it. ``open`` counts every
connection of the origin, idle or carrying a call, and those being opened; it never
passes the cap ``claim`` is given. A call that finds no idle connection and no room
waits (oldest first) for either a connection a finished call parks (handed over
directly) or the slot a closed one frees (``None``: open a new one).

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

ConnectionOrSlot = Connection | None
"""What a waiter is given: an idle connection, or ``None`` for a slot to connect in."""


REAP_SLACK = 0.05
"""Seconds after the oldest expiry that the reaper fires, so it finds it expired."""


class Pool:
    __slots__ = ("_clock", "_idle", "_max_idle", "_open", "_reaper", "_waiters")

    def __init__(self, clock: Callable[[], float], max_idle: int) -> None:
        self._idle: deque[Connection] = deque()
        self._open = 0
        self._waiters: deque[asyncio.Future[ConnectionOrSlot]] = deque()
        self._clock = clock
        self._max_idle = max_idle
        self._reaper: asyncio.TimerHandle | None = None

    @property
    def open(self) -> int:
        """Connections of this origin, idle, busy or being opened."""
        return self._open

    @property
    def idle(self) -> tuple[Connection, ...]:
        """The idle connections, oldest first."""
        return tuple(self._idle)

    def take_idle(self, now: float) -> Connection | None:
        """The most recently parked connection still usable; dead ones are closed."""
        idle = self._idle
        while idle:
            connection = idle.pop()
            if connection.usable(now):
                return connection
            connection.close()
            self._open -= 1
        return None

    def claim(self, cap: int) -> bool:
        """Count a connection about to be opened, if fewer than ``cap`` are open."""
        if self._open < cap:
            self._open += 1
            return True
        return False

    async def wait_for(self, deadline: float) -> ConnectionOrSlot:
        """Wait (until ``deadline`` on the event loop's clock) for a parked connection,
        usable, or a freed slot (``None``: connect in it). ``TimeoutError`` past the
        deadline; a waiter that gives up passes on what it was handed."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[ConnectionOrSlot] = loop.create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout_at(deadline):
                handed = await waiter
        except BaseException:
            self._pass_on(waiter)
            raise
        if handed is not None and not handed.usable(self._clock()):
            handed.close()  # died while handed over: its slot is this call's
            return None
        return handed

    def _pass_on(self, waiter: asyncio.Future[ConnectionOrSlot]) -> None:
        """A waiter gave up: what it was handed (if anything) goes to the next one."""
        if waiter in self._waiters:
            self._waiters.remove(waiter)
        elif waiter.done() and not waiter.cancelled():
            handed = waiter.result()
            if handed is None or not handed.usable(self._clock()):
                if handed is not None:
                    handed.close()
                self.free_slot()
            else:
                self.park(handed, self._clock())

    def _hand_over(self, handed: ConnectionOrSlot) -> bool:
        """Give a connection or a free slot to the oldest waiter; ``False`` if none waits."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(handed)
                return True
        return False

    def free_slot(self) -> None:
        """A connection of this origin closed: its slot goes to a waiter, or is freed."""
        if not self._hand_over(None):
            self._open -= 1

    def park(self, connection: Connection, now: float) -> None:
        """Keep ``connection`` idle (or hand it to a waiter); close what is over the
        idle bound, and the oldest idle connection if it expired."""
        if self._waiters and self._hand_over(connection):
            return
        idle = self._idle
        idle.append(connection)
        oldest = idle[0]
        if len(idle) > self._max_idle or oldest.closed or now >= oldest.expires:
            idle.popleft().close()
            self._open -= 1
        if self._reaper is None and idle:
            self._arm(now)

    def _arm(self, now: float) -> None:
        """Fire at the soonest expiry of an idle connection (on the client's clock)."""
        soonest = min(connection.expires for connection in self._idle)
        delay = max(0.0, soonest - now) + REAP_SLACK
        self._reaper = asyncio.get_running_loop().call_later(delay, self._reap)

    def _reap(self) -> None:
        """Close the idle connections that expired (or died); keep watching the rest."""
        self._reaper = None
        now = self._clock()
        kept = [c for c in self._idle if not c.closed and now < c.expires]
        for connection in self._idle:
            if connection.closed or now >= connection.expires:
                connection.close()
                self.free_slot()
        self._idle = deque(kept)
        if kept:
            self._arm(now)

    def close(self, error: Exception) -> None:
        """Close every idle connection; every waiting call fails with ``error``."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for connection in self._idle:
            connection.close()
        self._open -= len(self._idle)
        self._idle.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)
