"""How the usage writer cuts its queue into writes: ``batch_size`` records a write, and up
to ``CATCH_UP_BATCHES`` times as many while it is behind; every record written once."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from parley.domain.usage import UsageRecord
from parley.runtime.budget import SpendLedger
from parley.runtime.writer import CATCH_UP_BATCHES, UsageWriter
from parley.settings import UsageSettings
from parley.store.base import Store
from tests.records import usage_record


class SizesStore:
    """A store that keeps what it was asked to write."""

    def __init__(self) -> None:
        self.writes: list[list[str]] = []

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        self.writes.append([record.request_id for record in records])
        return len(records)


async def flushed(count: int, tmp_path: Path) -> list[list[str]]:
    store = SizesStore()
    settings = UsageSettings(batch_size=10, spill_dir=str(tmp_path))
    writer = UsageWriter(cast(Store, store), SpendLedger(cast(Store, store), "month"), settings)
    for number in range(count):
        writer.submit(usage_record(f"r{number:04d}"))
    assert await writer.flush()
    assert writer.backlog == 0
    assert [rid for write in store.writes for rid in write] == [
        f"r{number:04d}" for number in range(count)
    ]
    return store.writes


async def test_a_short_queue_is_written_in_batches(tmp_path: Path) -> None:
    writes = await flushed(20, tmp_path)  # two batches waiting: not behind
    assert [len(write) for write in writes] == [10, 10]


async def test_a_writer_behind_writes_larger_batches_until_it_caught_up(tmp_path: Path) -> None:
    big = 10 * CATCH_UP_BATCHES
    assert big > 20
    writes = await flushed(2 * big + 15, tmp_path)
    assert [len(write) for write in writes] == [big, big, 10, 5]


async def test_refusals_take_at_most_half_the_queue(tmp_path: Path) -> None:
    """A flood of refusals never fills the queue that admitted calls' records need: past
    half of ``queue_size`` a refusal's record is dropped (and counted), a call's never."""
    store = SizesStore()
    settings = UsageSettings(queue_size=8, spill_dir=str(tmp_path))
    writer = UsageWriter(cast(Store, store), SpendLedger(cast(Store, store), "month"), settings)
    queued = [writer.submit_refusal(usage_record(f"x{n}")) for n in range(6)]
    assert queued == [True] * 4 + [False] * 2 and writer.refusals_dropped == 2
    for number in range(4):
        writer.submit(usage_record(f"c{number}"))
    assert writer.backlog == 8 and writer.overloaded
    assert not writer.submit_refusal(usage_record("late"))
    assert await writer.flush()
    assert [rid for write in store.writes for rid in write] == [
        *(f"x{n}" for n in range(4)),
        *(f"c{n}" for n in range(4)),
    ]


async def test_a_full_batch_wakes_a_write_of_whole_batches_the_rest_waits_for_the_timer(
    tmp_path: Path,
) -> None:
    """Under load each write is a whole batch: the records that came in while one was
    written are not written on their own at once (a transaction costs about as much for a
    few records as for a batch), but with the next batch or when ``flush_seconds`` pass."""
    store = SizesStore()
    settings = UsageSettings(batch_size=10, flush_seconds=0.4, spill_dir=str(tmp_path))
    writer = UsageWriter(cast(Store, store), SpendLedger(cast(Store, store), "month"), settings)
    await writer.start()
    try:
        for number in range(13):
            writer.submit(usage_record(f"r{number:04d}"))
        await asyncio.sleep(0.1)
        assert [len(write) for write in store.writes] == [10]
        assert writer.backlog == 3
        for number in range(13, 20):
            writer.submit(usage_record(f"r{number:04d}"))
        await asyncio.sleep(0.1)
        assert [len(write) for write in store.writes] == [10, 10]
        writer.submit(usage_record("r0020"))
        await asyncio.sleep(0.6)  # the timer: everything queued is written
        assert [len(write) for write in store.writes] == [10, 10, 1]
        assert writer.backlog == 0
    finally:
        await writer.close(1.0)
    assert [rid for write in store.writes for rid in write] == [f"r{n:04d}" for n in range(21)]


async def test_a_shutdown_as_a_batch_fills_still_stops_the_loop(tmp_path: Path) -> None:
    """``close`` stops the loop even when the stop comes in the same turn of the event
    loop as a full batch's wake-up: Python 3.11's ``asyncio.wait_for`` returns the wake-up
    and drops a cancellation that arrives then, so a loop stopped by cancelling it waited
    for ever, and the shutdown spilled every record it had queued."""
    for turns in range(6):
        store = SizesStore()
        settings = UsageSettings(batch_size=10, spill_dir=str(tmp_path))
        writer = UsageWriter(cast(Store, store), SpendLedger(cast(Store, store), "month"), settings)
        await writer.start()
        await asyncio.sleep(0.01)  # the loop waits for a batch or the timer
        for number in range(10):
            writer.submit(usage_record(f"t{turns}-{number}"))
        for _ in range(turns):
            await asyncio.sleep(0)
        await asyncio.wait_for(writer.close(5.0), 2.0)
        assert writer.backlog == 0
        assert not os.listdir(tmp_path), f"spilled after {turns} turns"
        assert sorted(rid for write in store.writes for rid in write) == sorted(
            f"t{turns}-{number}" for number in range(10)
        )
