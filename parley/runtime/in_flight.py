"""The calls in flight right now, so that shutdown can end them cleanly.

The runner registers the task of every stream it relays while the stream is open, and of
every whole-reply call while it waits for its upstream.
``end_all`` (called by shutdown at the end of its grace period) marks each one as
ending and cancels it; the runner, seeing the mark, does not treat the cancellation as a
caller who left: it sends the caller an error event and ``data: [DONE]`` (or cuts a raw
audio body), meters the call with ``SHUTDOWN_STATUS`` and bills what was delivered. A
whole-reply call still waiting gets a 503 envelope and the same status, billed nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

SHUTDOWN_STATUS = 599
"""The usage record's status for a stream the gateway ended because it was shutting
down (never an HTTP status a caller sees: the stream's reply had already begun with
200; the caller gets a 503 ``service_unavailable`` error event instead)."""

Task = asyncio.Task[Any]


class CallsInFlight:
    """A registry of the tasks of calls in flight (streams, and whole replies still
    waiting for their upstream); one per process, on ``Services``."""

    __slots__ = ("_ending", "_loop", "_open")

    def __init__(self) -> None:
        self._open: set[Task] = set()
        self._ending: set[Task] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def current(self) -> Task:
        """The task running the caller (a request handler always runs in one).

        ``asyncio.current_task()`` without a loop asks for the running loop, and CPython
        checks that loop against ``getpid()``: one system call per request. The loop is
        the same for the process's life, so it is asked for once.
        """
        task = asyncio.current_task(self._loop) if self._loop is not None else None
        if task is None:  # the first call, or (in tests) another loop
            self._loop = asyncio.get_running_loop()
            task = asyncio.current_task(self._loop)
        assert task is not None
        return task

    def __len__(self) -> int:
        return len(self._open)

    def add(self, task: Task) -> None:
        self._open.add(task)

    def discard(self, task: Task) -> None:
        self._open.discard(task)
        self._ending.discard(task)

    def ending(self, task: Task) -> bool:
        """Whether ``task`` was cancelled by ``end_all`` (not by a caller who left)."""
        return task in self._ending

    async def end_all(self, wait_seconds: float = 5.0) -> int:
        """End every call in flight (a stream with an error event and ``[DONE]``); wait up
        to ``wait_seconds`` for them to be written. Returns how many there were."""
        tasks = list(self._open)
        for task in tasks:
            self._ending.add(task)
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=wait_seconds)
        return len(tasks)
