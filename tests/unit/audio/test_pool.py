"""The probe pool: bounded threads, one group's clips never starve another's."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from typing import Any

import pytest

from parley.audio import AudioInfo
from parley.audio.budget import DecodeBudget
from parley.audio.errors import AudioTooCostly
from parley.audio.pool import ProbePool
from parley.errors import ServiceUnavailable
from tests.clips import clip
from tests.hostile_clips import silent_flac

BOMB = silent_flac(200_000, 16, 48_000, numbered=False)
"""2.6 MB of 16-sample frames: over a second of CPU to decode whole."""


async def test_a_groups_bombs_do_not_delay_another_groups_clip() -> None:
    pool = ProbePool(2, 1, DecodeBudget(cpu_seconds=0.4, cpu_seconds_per_hour=0.0))
    ended: list[str] = []

    async def measure(group: int, data: bytes, name: str) -> AudioInfo | Exception:
        try:
            return await pool.measure(group, io.BytesIO(data))
        except AudioTooCostly as refused:
            return refused
        finally:
            ended.append(name)

    try:
        bombs = [asyncio.create_task(measure(1, BOMB, f"bomb{i}")) for i in range(4)]
        await asyncio.sleep(0.05)  # the bombs are in line (one decoding) before the clip
        started = time.monotonic()
        info = await measure(2, clip("wav", 5.0), "clip")
        waited = time.monotonic() - started
        results = await asyncio.gather(*bombs)
    finally:
        pool.close()
    assert isinstance(info, AudioInfo) and info.milliseconds == 5000
    assert all(isinstance(result, AudioTooCostly) for result in results)
    assert ended[0] == "clip", ended  # before even the first bomb's 0.4 s of CPU is spent
    assert waited < 2.0, waited


class HeldClip(io.BytesIO):
    """A clip whose first read waits until ``release`` is set: its measurement holds the
    pool's one thread for as long as the test needs, whatever the machine's load."""

    def __init__(self, data: bytes, release: threading.Event) -> None:
        super().__init__(data)
        self._release = release

    def read(self, size: int | None = -1, /) -> bytes:
        self._release.wait(10)
        return super().read(size)

    def readinto(self, buffer: Any, /) -> int:
        self._release.wait(10)
        return super().readinto(buffer)


async def test_clips_waiting_take_turns_group_by_group() -> None:
    pool = ProbePool(1, 1, DecodeBudget())
    data = clip("wav", 0.5)
    order: list[int] = []
    release = threading.Event()

    async def measure(group: int, file: io.BytesIO) -> None:
        await pool.measure(group, file)
        order.append(group)

    try:
        blocker = asyncio.create_task(measure(0, HeldClip(data, release)))
        await asyncio.sleep(0)
        tasks = [
            asyncio.create_task(measure(group, io.BytesIO(data))) for group in (1, 1, 1, 2, 2, 3)
        ]
        await asyncio.sleep(0)  # every clip is waiting for its turn
        release.set()
        await asyncio.gather(blocker, *tasks)
    finally:
        release.set()
        pool.close()
    assert order == [0, 1, 2, 3, 1, 2, 1]


async def test_a_group_never_holds_more_than_its_share_of_threads() -> None:
    pool = ProbePool(3, 1, DecodeBudget(cpu_seconds=0.2, cpu_seconds_per_hour=0.0))
    seen: list[int] = []

    async def watch() -> None:
        while True:
            seen.append(pool.busy)
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        tries = [pool.measure(7, io.BytesIO(BOMB)) for _ in range(3)]
        results = await asyncio.gather(*tries, return_exceptions=True)
    finally:
        watcher.cancel()
        pool.close()
    assert all(isinstance(result, AudioTooCostly) for result in results)
    assert max(seen) == 1, "one group's three clips ran one at a time on three threads"


async def test_a_caller_who_leaves_stops_its_decoding_and_frees_the_thread() -> None:
    pool = ProbePool(1, 1, DecodeBudget(cpu_seconds=60.0))
    try:
        decoding = asyncio.create_task(pool.measure(1, io.BytesIO(BOMB)))
        waiting = asyncio.create_task(pool.measure(1, io.BytesIO(BOMB)))
        await asyncio.sleep(0.1)
        assert pool.busy == 1
        started = time.monotonic()
        waiting.cancel()
        decoding.cancel()
        for task in (waiting, decoding):
            with pytest.raises(asyncio.CancelledError):
                await task
        assert time.monotonic() - started < 0.5, "the thread stopped between packets"
        assert pool.busy == 0
        info = await pool.measure(1, io.BytesIO(clip("wav", 1.0)))
        assert info.milliseconds == 1000, "the thread and the group's turn are free again"
    finally:
        pool.close()


async def test_a_closed_pool_answers_503_and_stops_what_it_measures() -> None:
    pool = ProbePool(1, 1, DecodeBudget(cpu_seconds=60.0))
    decoding = asyncio.create_task(pool.measure(1, io.BytesIO(BOMB)))
    waiting = asyncio.create_task(pool.measure(2, io.BytesIO(BOMB)))
    await asyncio.sleep(0.1)
    pool.close()
    for task in (decoding, waiting):
        with pytest.raises(ServiceUnavailable):
            await task
    with pytest.raises(ServiceUnavailable):
        await pool.measure(3, io.BytesIO(clip("wav", 1.0)))
