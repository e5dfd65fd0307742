"""Slots for costly work, shared fairly between groups.

A group that asks for many slots, or holds them long, waits behind its own requests and
never holds the slots another group needs: at most ``per_group`` of ``slots`` are one
group's at once, and when work waits the slots go to the waiting groups in turn (round
robin, one a turn), so a group's place in line does not depend on how much it queued.
The audio probes (``audio/pool.py``) and the body processes (``runtime/body_pool.py``)
take their turns here.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque

from parley.errors import ServiceUnavailable


class GroupTurns:
    """Slots for work, at most ``slots`` at once and ``per_group`` of one group's,
    granted to waiting groups in turn; once closed, a 503 saying ``stopping``."""

    def __init__(self, slots: int, per_group: int, stopping: str) -> None:
        self._slots = slots
        self._stopping = stopping
        self._per_group = max(1, min(per_group, slots))
        self._busy = 0
        self._running: dict[int, int] = {}
        self._waiting: OrderedDict[int, deque[asyncio.Future[None]]] = OrderedDict()
        self._closed = False

    @property
    def busy(self) -> int:
        """Slots held now."""
        return self._busy

    async def take(self, group: int) -> None:
        """Wait for a slot for ``group``; the caller owes one ``release(group)``."""
        if self._closed:
            raise ServiceUnavailable(self._stopping)
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
                    turn.set_exception(ServiceUnavailable(self._stopping))
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
