"""The registry of calls in flight: shutdown cancels each one, marked as its own doing."""

from __future__ import annotations

import asyncio

from parley.runtime.in_flight import CallsInFlight


async def relay_until_cancelled(streams: CallsInFlight, seen: list[bool]) -> None:
    """Stands in for the runner's side: register, wait, tell who cancelled, deregister."""
    task = asyncio.current_task()
    assert task is not None
    streams.add(task)
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        seen.append(streams.ending(task))
        task.uncancel()
    finally:
        streams.discard(task)


async def test_end_all_cancels_every_open_stream_marked_as_ending_and_waits() -> None:
    streams, seen = CallsInFlight(), []
    tasks = [asyncio.create_task(relay_until_cancelled(streams, seen)) for _ in range(3)]
    await asyncio.sleep(0)
    assert len(streams) == 3
    assert await streams.end_all(wait_seconds=5) == 3
    assert seen == [True, True, True]
    assert all(task.done() for task in tasks)
    assert len(streams) == 0


async def test_a_stream_cancelled_otherwise_is_not_marked_as_ending() -> None:
    streams, seen = CallsInFlight(), []
    task = asyncio.create_task(relay_until_cancelled(streams, seen))
    await asyncio.sleep(0)
    task.cancel()  # the caller left: aiohttp cancels the handler
    await task
    assert seen == [False]
    assert len(streams) == 0
    assert await streams.end_all() == 0
