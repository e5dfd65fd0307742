"""The store's files and batches, the same on SQLite and PostgreSQL: a group sees only
its own, a line is recorded sent at most once and only while its batch runs, and a
line's end is written only from the state it was in."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from parley.domain.batches import (
    CANCELLING,
    CLAIMED,
    DONE,
    IN_PROGRESS,
    LINE_FAILED,
    QUEUED,
    SENT,
    VALIDATING,
    Batch,
    BatchLine,
    new_batch_id,
)
from parley.domain.files import StoredFile, new_file_id
from parley.store.sql import SqlStore
from tests.contract.test_store import store, store_target  # noqa: F401

NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)


def a_file(group_id: int, size: int = 10, expires_at: datetime | None = None) -> StoredFile:
    return StoredFile(new_file_id(), group_id, "in.jsonl", "batch", size, NOW, expires_at)


async def a_batch(
    store: SqlStore,  # noqa: F811
    group_id: int,
    lines: int,
    expires_at: datetime | None = None,
) -> Batch:
    batch = Batch(
        id=new_batch_id(),
        group_id=group_id,
        key_id=1,
        endpoint="/v1/chat/completions",
        input_file_id=new_file_id(),
        completion_window="24h",
        status=VALIDATING,
        created_at=NOW,
        expires_at=expires_at or datetime.now(UTC) + timedelta(days=1),
    )
    await store.add_batch(batch)
    await store.add_batch_lines(
        [BatchLine(batch.id, n, f"c{n}", "{}", QUEUED) for n in range(1, lines + 1)]
    )
    await store.set_batch_status(batch.id, IN_PROGRESS, only_from=(VALIDATING,), total=lines)
    return batch


async def test_files_are_private_sized_and_expire(store: SqlStore) -> None:  # noqa: F811
    mine, theirs = await store.create_group("mine"), await store.create_group("theirs")
    kept, gone = a_file(mine.id, 10), a_file(mine.id, 5, datetime.now(UTC) - timedelta(1))
    for stored in (kept, gone, a_file(theirs.id, 7)):
        await store.add_file(stored)
    assert await store.find_file(kept.id, mine.id) == kept
    assert await store.find_file(kept.id, theirs.id) is None
    assert await store.find_file(gone.id, mine.id) is None  # expired: not found
    assert await store.group_file_bytes(mine.id) == 10
    assert [f.id for f in (await store.list_files(mine.id, limit=10)).files] == [kept.id]
    assert await store.expired_files(10) == [gone.id]
    assert not await store.delete_file(kept.id, theirs.id)
    assert await store.delete_file(kept.id, mine.id)
    assert await store.forget_files([gone.id]) == 1


async def test_a_files_chunks_come_back_in_order(store: SqlStore) -> None:  # noqa: F811
    for seq, data in enumerate((b"one", b"two", b"")):
        await store.add_file_chunk("file-x", seq, data)
    assert [await store.file_chunk("file-x", n) for n in range(4)] == [b"one", b"two", b"", None]
    await store.delete_file_chunks("file-x")
    assert await store.file_chunk("file-x", 0) is None


async def test_a_batch_is_its_groups_alone(store: SqlStore) -> None:  # noqa: F811
    mine, theirs = await store.create_group("mine"), await store.create_group("theirs")
    batch = await a_batch(store, mine.id, 2)
    assert (await store.find_batch(batch.id, mine.id)).total == 2  # type: ignore[union-attr]
    assert await store.find_batch(batch.id, theirs.id) is None
    assert (await store.list_batches(theirs.id, limit=10)).batches == []
    assert [b.id for b in (await store.list_batches(mine.id, limit=10)).batches] == [batch.id]


async def test_a_line_is_taken_by_one_lane_and_sent_once_only_while_its_batch_runs(
    store: SqlStore,  # noqa: F811
) -> None:
    group = await store.create_group("team")
    batch = await a_batch(store, group.id, 5)
    lanes = [f"lane_{n}" for n in range(6)]
    taken = await asyncio.gather(*(store.claim_batch_lines(batch.id, x, most=2) for x in lanes))
    taken.append(await store.claim_batch_lines(batch.id, lanes[0], most=5))  # what is left
    numbers = [item.line for lines in taken for item in lines]
    assert sorted(numbers) == [1, 2, 3, 4, 5]  # every line taken, none twice
    owner = {item.line: str(item.owner) for lines in taken for item in lines}
    assert all(item.state == CLAIMED for lines in taken for item in lines)
    other = next(lane for lane in lanes if lane != owner[1])
    assert not await store.mark_line_sent(batch.id, 1, other)  # not its claim
    tries = await asyncio.gather(*(store.mark_line_sent(batch.id, 1, owner[1]) for _ in range(5)))
    assert sorted(tries) == [False] * 4 + [True]
    assert [line.line for line in await store.batch_lines(batch.id, SENT)] == [1]

    await store.set_batch_status(batch.id, CANCELLING, only_from=(IN_PROGRESS,))
    assert not await store.mark_line_sent(batch.id, 2, owner[2])  # a cancel stops new lines
    assert await store.release_batch_lines(batch.id, [2], owner[2], from_state=CLAIMED) == 1
    assert await store.claim_batch_lines(batch.id, other, most=5) == []  # nor are they taken
    assert 2 in [line.line for line in await store.batch_lines(batch.id, QUEUED)]


async def test_no_line_is_sent_past_its_batchs_expiry(store: SqlStore) -> None:  # noqa: F811
    group = await store.create_group("team")
    past = datetime.now(UTC) - timedelta(seconds=1)
    batch = await a_batch(store, group.id, 1, expires_at=past)
    assert [i.line for i in await store.claim_batch_lines(batch.id, "lane", most=1)] == [1]
    assert not await store.mark_line_sent(batch.id, 1, "lane")


async def test_a_dead_lanes_lines_and_batches_are_the_others(
    store: SqlStore,  # noqa: F811
) -> None:
    group = await store.create_group("team")
    batch = await a_batch(store, group.id, 3)
    await store.beat_batch_lane("lane_a", 60)
    await store.beat_batch_lane("lane_b", 60)
    assert [i.line for i in await store.claim_batch_lines(batch.id, "lane_a", most=2)] == [1, 2]
    assert await store.mark_line_sent(batch.id, 1, "lane_a")
    assert await store.orphan_batch_lines(batch.id, SENT, "lane_b", most=10) == []  # a lives
    assert await store.requeue_orphan_lines(batch.id, "lane_b") == 0
    assert await store.take_batch(batch.id, "lane_a")
    assert not await store.take_batch(batch.id, "lane_b")  # a live lane ends it

    await store.beat_batch_lane("lane_a", -1)  # its lease ran out
    assert await store.orphan_batch_lines(batch.id, SENT, "lane_a", most=10) == []  # not to a
    orphans = await store.orphan_batch_lines(batch.id, SENT, "lane_b", most=10)
    assert [i.line for i in orphans] == [1]
    assert await store.requeue_orphan_lines(batch.id, "lane_b") == 1  # line 2: never sent
    assert sorted(i.line for i in await store.batch_lines(batch.id, QUEUED)) == [2, 3]
    assert await store.take_batch(batch.id, "lane_b")
    assert not await store.take_batch(batch.id, "lane_a")

    await store.drop_batch_lanes("lane_c", others=True)  # one instance: others are gone
    assert await store.take_batch(batch.id, "lane_c")


async def test_a_lines_end_is_written_only_from_its_state(store: SqlStore) -> None:  # noqa: F811
    group = await store.create_group("team")
    batch = await a_batch(store, group.id, 3)
    assert [i.line for i in await store.claim_batch_lines(batch.id, "lane", most=1)] == [1]
    assert await store.mark_line_sent(batch.id, 1, "lane")
    ended = [(1, DONE, "ok"), (2, LINE_FAILED, "expired")]
    assert await store.finish_batch_lines(batch.id, ended, from_state=QUEUED) == 1  # line 2
    assert await store.finish_batch_lines(batch.id, ended, from_state=SENT) == 1  # line 1
    assert await store.finish_batch_lines(batch.id, ended, from_state=SENT) == 0  # once only
    found = await store.find_batch(batch.id, group.id)
    assert found is not None and (found.completed, found.failed) == (1, 1)
    assert await store.batch_line_counts(batch.id) == {DONE: 1, LINE_FAILED: 1, QUEUED: 1}
    assert await store.batch_results(batch.id, DONE, after=0, most=10) == [(1, "ok")]
    assert await store.all_batch_results(batch.id, after=0, most=10) == [(1, "ok"), (2, "expired")]
    assert await store.batch_line_counts_of([batch.id]) == {
        batch.id: {DONE: 1, LINE_FAILED: 1, QUEUED: 1}
    }
    assert not await store.delete_batch(batch.id, group.id)  # still running
    await store.set_batch_status(batch.id, "completed", only_from=(IN_PROGRESS,))
    assert not await store.delete_batch(batch.id, group.id + 1)  # another group's
    assert await store.delete_batch(batch.id, group.id)
    assert await store.find_batch(batch.id, group.id) is None
    assert await store.batch_line_counts(batch.id) == {}
