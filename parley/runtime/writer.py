"""The batched background writer of usage records.

Records are queued without waiting and written in batches: when a batch fills, and at
least every ``flush_seconds``. A write woken by a full batch writes whole batches only
and leaves the few records that arrived meanwhile for the next batch or the timer: each
write is one transaction whose cost hardly depends on its size (the pages it rewrites,
the file locks, the hop to the database's thread), so a writer that drained its queue to
the last record would, under steady load, follow each batch with a string of small
writes costing a batch each. A failed write keeps its batch at the head of the queue and
is tried again every ``RETRY_SECONDS`` (or ``flush_seconds`` if shorter), not with a
growing back-off: a database that returns is written to again within about a second, so
the queue (and the ``overloaded`` refusal it drives) drains at once. While writes fail,
new records do not wake the loop early, so a busy gateway does not hammer a database
that is down. At shutdown the queue is written out; if the database still refuses, or
has not answered when the shutdown's time is up (a hung server holds a write until its
timeout), the records are spilled to a JSON-lines file in ``spill_dir`` and written at
the next start. A record whose write was still in doubt is spilled too: the store
ignores a record it already has, so a replay never counts twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from parley.domain.usage import UsageRecord
from parley.runtime.budget import SpendLedger
from parley.runtime.refusal_rows import RefusalRows
from parley.runtime.spill import SpillFiles, finish_within
from parley.settings import UsageSettings
from parley.store.base import StoreError, UsageStore

log = logging.getLogger("parley.meter")
RETRY_SECONDS = 1.0
"""The longest wait between two attempts while the database refuses writes."""
CATCH_UP_BATCHES = 10
"""When more than two batches wait, one write takes up to this many batches' records:
each write has a fixed cost (a transaction, a hop to the database's thread or server,
which waits for a turn of a busy event loop, or for the host's usage writer), so a writer
that fell behind catches up with fewer, larger writes (docs/performance.md, Eight workers
on one SQLite file)."""
SPILL_STEM = "parley-usage-spill"


class UsageWriter:
    def __init__(self, store: UsageStore, ledger: SpendLedger, settings: UsageSettings) -> None:
        self._store = store
        self._ledger = ledger
        self._settings = settings
        self._spills = SpillFiles(settings.spill_dir, SPILL_STEM)
        self._queue: deque[UsageRecord] = deque()
        self._wake = asyncio.Event()
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._refusal_room = settings.queue_size // 2
        self._refusal_rows = RefusalRows()
        self.written = 0
        self.refusals_dropped = 0
        """Refusals not queued because the queue was past half full (``submit_refusal``)."""
        self.on_batch: Callable[[float, bool], None] | None = None
        """Told how long each batch write took and whether it succeeded (metrics)."""

    @property
    def backlog(self) -> int:
        return len(self._queue)

    @property
    def overloaded(self) -> bool:
        """More records wait than the queue is meant to hold: admission should pause."""
        return len(self._queue) >= self._settings.queue_size

    def submit(self, record: UsageRecord) -> None:
        self._queue.append(record)
        if len(self._queue) >= self._settings.batch_size:
            self._wake.set()

    def submit_refusal(self, record: UsageRecord) -> bool:
        """Queue a refusal's record while the queue is at most half full, else drop it:
        a flood of refusals never fills the queue that admitted calls' records need. Past
        the first few of its kind in a minute it is counted on one line instead
        (``RefusalRows``), written when the minute is over."""
        if not self._refusal_rows.admit(record):
            return True
        if len(self._queue) >= self._refusal_room:
            self.refusals_dropped += 1
            return False
        self._queue.append(record)
        return True

    async def start(self) -> None:
        await self.replay_spills()
        self._task = asyncio.create_task(self._run(), name="parley-usage-writer")

    async def close(self, seconds: float | None = None) -> None:
        """Stop the loop, write what is queued, spill what cannot be written.

        With ``seconds``, waiting on the database stops after that long whatever it does
        (a write in progress is left to its fate, not awaited), and every record not
        known to be written is spilled.
        """
        finished = await finish_within(self._finish(), lambda: self._task, seconds)
        if finished is None:
            self._task = None
            log.error("the database did not answer within the shutdown's %.1fs", seconds)
            self._spill()
        elif not finished.result():
            self._spill()

    async def _finish(self) -> bool:
        """Stop the loop and write the queue; False when the store refused (records kept)."""
        if self._task is not None:
            # Never cancel a write in progress: a SQLite transaction cut off mid-way keeps
            # the database locked, so the final flush would fail and spill the records.
            async with self._flushing:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._queue.extend(self._refusal_rows.all())
        # Three tries for a blip; one when writes were already failing, so a database that
        # is down or hung (each try may wait its timeout) does not hold the shutdown long.
        for attempt in range(1 if self._failing else 3):
            if attempt:
                await asyncio.sleep(0.2)
            if await self.flush():
                return True
        return False

    async def flush(self, *, whole_batches: bool = False) -> bool:
        """Write every queued record (with ``whole_batches``, only while a whole batch
        waits); False when the store refused (records kept).

        One flush at a time: the loop, an explicit flush and shutdown never write the
        same head of the queue twice.
        """
        async with self._flushing:
            self._queue.extend(self._refusal_rows.ended(time.time()))
            return await self._flush_queue(self._settings.batch_size if whole_batches else 1)

    async def _flush_queue(self, least: int) -> bool:
        while len(self._queue) >= least:
            size = self._settings.batch_size
            if len(self._queue) > 2 * size:
                size *= CATCH_UP_BATCHES
            batch = [self._queue[i] for i in range(min(size, len(self._queue)))]
            if not await self._write(batch):
                return False
            for _ in batch:
                self._queue.popleft()
        return True

    @property
    def failing(self) -> bool:
        """The last write failed; records are kept and retried."""
        return self._failing

    @property
    def next_attempt_seconds(self) -> float:
        """How long the loop waits before its next write: the flush interval, or while
        writes fail the retry interval (never longer than ``RETRY_SECONDS``)."""
        if self._failing:
            return min(self._settings.flush_seconds, RETRY_SECONDS)
        return self._settings.flush_seconds

    async def _run(self) -> None:
        while True:
            filled = False
            if self._failing:
                await asyncio.sleep(self.next_attempt_seconds)
            else:
                # ``asyncio.timeout``, not ``wait_for``: in Python 3.11 ``wait_for`` returns
                # a wake-up that came in the same turn as ``close``'s cancellation and
                # drops the cancellation, and the loop never stopped.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.next_attempt_seconds):
                        await self._wake.wait()
                        filled = True
            self._wake.clear()
            # Woken by a full batch, write whole batches only: the records that came in
            # while one was written wait for the next batch or the timer, not a small
            # write of their own, whose transaction costs as much as a whole batch's.
            await self.flush(whole_batches=filled)

    async def _write(self, batch: Sequence[UsageRecord]) -> bool:
        started = time.monotonic()
        try:
            await self._store.record_usage(batch)
        except StoreError as error:
            self._observe(started, ok=False)
            if not self._failing:
                log.error("usage records could not be written (%s); will retry", error)
            self._failing = True
            return False
        self._observe(started, ok=True)
        if self._failing:
            log.info("usage records are being written again")
        self._failing = False
        self.written += len(batch)
        self._ledger.written(batch)
        return True

    def _observe(self, started: float, *, ok: bool) -> None:
        if self.on_batch is not None:
            self.on_batch(time.monotonic() - started, ok)

    def _spill(self) -> None:
        if not self._queue:
            return
        path = self._spills.keep(dataclasses.asdict(record) for record in self._queue)
        log.error(
            "database unreachable at shutdown: %d usage records kept in %s", len(self._queue), path
        )
        self._queue.clear()

    async def replay_spills(self) -> None:
        for path, count in await self._spills.replay(self._replay):
            log.info("replayed %d spilled usage records from %s", count, path)

    async def _replay(self, rows: list[dict[str, Any]]) -> bool:
        self._queue.extendleft(reversed([_record(row) for row in rows]))
        if await self.flush():
            return True
        self._queue.clear()
        return False


def _record(data: dict[str, Any]) -> UsageRecord:
    data["created_at"] = datetime.fromisoformat(data["created_at"])
    return UsageRecord(**data)
