"""The body pool: processes in bounded number, one group's bodies never ahead of another's."""

from __future__ import annotations

import asyncio
import gc
import os
import time

import pytest

from parley.errors import ServiceUnavailable
from parley.runtime.body_pool import STOPPING, BodyPool, uncollected
from parley.turns import GroupTurns


async def test_waiting_groups_take_turns_one_body_each() -> None:
    turns = GroupTurns(1, 1, STOPPING)
    order: list[int] = []

    async def work(group: int) -> None:
        await turns.take(group)
        order.append(group)
        await asyncio.sleep(0)
        turns.release(group)

    await turns.take(0)  # the one slot is held while everyone queues
    tasks = [asyncio.create_task(work(group)) for group in (1, 1, 1, 2, 2, 3)]
    await asyncio.sleep(0)
    turns.release(0)
    await asyncio.gather(*tasks)
    assert order == [1, 2, 3, 1, 2, 1]


async def test_a_group_never_holds_more_than_its_share() -> None:
    turns = GroupTurns(3, 1, STOPPING)
    await turns.take(7)
    second = asyncio.create_task(turns.take(7))
    other = asyncio.create_task(turns.take(8))
    await asyncio.sleep(0)
    assert other.done() and not second.done()
    assert turns.busy == 2
    turns.release(7)
    await second
    assert turns.busy == 2


async def test_a_caller_who_leaves_the_line_frees_nothing_it_did_not_hold() -> None:
    turns = GroupTurns(1, 1, STOPPING)
    await turns.take(1)
    leaving = asyncio.create_task(turns.take(2))
    await asyncio.sleep(0)
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    turns.release(1)
    assert turns.busy == 0
    await turns.take(3)
    assert turns.busy == 1


async def test_a_closed_line_answers_503() -> None:
    turns = GroupTurns(1, 1, STOPPING)
    await turns.take(1)
    waiting = asyncio.create_task(turns.take(2))
    await asyncio.sleep(0)
    turns.close()
    with pytest.raises(ServiceUnavailable):
        await waiting
    with pytest.raises(ServiceUnavailable):
        await turns.take(3)


async def test_work_runs_in_another_process_and_frees_its_slot() -> None:
    pool = BodyPool(1, 1)
    try:
        pid = await pool.run(1, os.getpid)
        assert pid != os.getpid()
        assert await pool.run(2, len, b"four") == 4
        for _ in range(400):  # the executor's thread hands the slot back
            if pool.busy == 0:
                break
            await asyncio.sleep(0.05)
        assert pool.busy == 0
    finally:
        pool.close()
    with pytest.raises(ServiceUnavailable):
        await pool.run(1, os.getpid)


async def test_a_process_that_dies_is_a_503_and_the_next_body_gets_a_new_one() -> None:
    pool = BodyPool(1, 1)
    try:
        with pytest.raises(ServiceUnavailable, match="body stopped"):  # LOST, not STOPPING
            await pool.run(1, os._exit, 3)
        pid = await pool.run(1, os.getpid)
        assert pid != os.getpid()
    finally:
        pool.close()


async def test_bodies_are_read_with_the_cyclic_collector_paused() -> None:
    pool = BodyPool(1, 1)
    try:
        assert await pool.run(1, gc.isenabled) is False
    finally:
        pool.close()
    assert uncollected(gc.isenabled, ()) is False
    assert gc.isenabled()


async def test_work_asks_for_a_process_and_gets_it_when_it_is_free() -> None:
    pool = BodyPool(2, 2)
    try:
        place, pid = await pool.placed(1, None, os.getpid)
        for _ in range(3):
            assert await pool.placed(1, place, os.getpid) == (place, pid)
        other = 1 - place
        holding = asyncio.create_task(pool.placed(2, place, time.sleep, 1.0))
        await asyncio.sleep(0.05)  # the asked-for process is busy: another one runs it
        where, other_pid = await pool.placed(1, place, os.getpid)
        assert (where, other_pid != pid) == (other, True)
        assert (await holding)[0] == place
    finally:
        pool.close()
