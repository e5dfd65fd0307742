"""``BatchLane.stop`` ends the lane's loop even when the stop comes in the same turn of the
event loop as a wake-up (a batch created, a line ended): Python 3.11's ``asyncio.wait_for``
returns the wake-up and drops a cancellation that arrives then, and a lane that waited
that way never stopped, so the shutdown hung on it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from parley.api.batch_lane import BatchLane
from parley.pipeline.services import Services
from parley.settings import Settings


class IdleStore:
    """A database with no batch: every look finds nothing to do."""

    async def drop_batch_lanes(self, lane: str, *, others: bool) -> None:
        return None

    async def beat_batch_lane(self, lane: str, seconds: float) -> None:
        return None

    async def runnable_batches(self) -> list[Any]:
        return []

    async def batch_line_counts_of(self, ids: list[str]) -> dict[str, dict[str, int]]:
        return {}


def lane() -> BatchLane:
    settings = Settings.model_validate(
        {"database": {"url": "sqlite:///unused.db"}, "batches": {"adaptive": False}}
    )
    services = SimpleNamespace(settings=settings, store=IdleStore())
    return BatchLane(cast(Services, services))


async def test_a_stop_in_the_turn_of_a_wake_up_still_ends_the_lane() -> None:
    for turns in range(6):
        running = lane()
        running.start()
        await asyncio.sleep(0.01)  # the loop waits for work or its poll
        running.wake()
        for _ in range(turns):
            await asyncio.sleep(0)
        closing = asyncio.ensure_future(running.close(0.1))
        done, _ = await asyncio.wait({closing}, timeout=2.0)  # ``wait`` drops no cancel
        assert done, f"the lane did not stop after a wake-up {turns} turns before"
