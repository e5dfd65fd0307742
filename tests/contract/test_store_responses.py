"""Stored responses in the store, on SQLite and PostgreSQL alike: saved once (a replayed
batch adds nothing), found only by their own group and only until they expire, deleted
by their own group, pruned after expiry; and the ``ResponseBook`` in front of them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from parley.domain.responses import StoredResponse
from parley.runtime.response_book import ResponseBook
from parley.settings import ResponsesSettings
from parley.store.sql import SqlStore
from tests.contract.test_store import store, store_target  # noqa: F401


def stored(response_id: str, group_id: int, *, expires_in: timedelta) -> StoredResponse:
    now = datetime.now(UTC)
    return StoredResponse(
        id=response_id,
        group_id=group_id,
        model="gpt-like",
        response=f'{{"id": "{response_id}", "output": []}}',
        input_items='[{"id": "msg_1", "type": "message"}]',
        history="[]",
        created_at=now,
        expires_at=now + expires_in,
    )


async def two_groups(opened: SqlStore) -> tuple[int, int]:
    return (await opened.create_group("team")).id, (await opened.create_group("others")).id


async def test_a_response_is_found_by_its_group_only(store: SqlStore) -> None:  # noqa: F811
    team, others = await two_groups(store)
    assert await store.save_responses([stored("resp_a", team, expires_in=timedelta(days=1))]) == 1
    found = await store.find_response("resp_a", team)
    assert found is not None and found.response.startswith('{"id": "resp_a"')
    assert found.created_at.tzinfo is not None
    assert await store.find_response("resp_a", others) is None
    assert not await store.delete_response("resp_a", others)
    assert await store.find_response("resp_a", team) is not None
    assert await store.delete_response("resp_a", team)
    assert await store.find_response("resp_a", team) is None


async def test_a_replayed_batch_adds_nothing_twice(store: SqlStore) -> None:  # noqa: F811
    team, _ = await two_groups(store)
    batch = [stored(f"resp_{n}", team, expires_in=timedelta(days=1)) for n in range(3)]
    assert await store.save_responses(batch[:2]) == 2
    assert await store.save_responses(batch) == 1


async def test_two_writes_of_one_batch_at_once_store_it_once(store: SqlStore) -> None:  # noqa: F811
    """A flush cut short at shutdown may still be committing when the batch is written
    again: neither write fails, and each response is stored once."""
    team, _ = await two_groups(store)
    batch = [stored(f"resp_{n}", team, expires_in=timedelta(days=1)) for n in range(20)]
    counts = await asyncio.gather(*(store.save_responses(batch) for _ in range(4)))
    assert sum(counts) == 20
    assert all([await store.find_response(f"resp_{n}", team) for n in range(20)])


async def test_expired_responses_are_not_found_and_are_pruned(store: SqlStore) -> None:  # noqa: F811
    team, _ = await two_groups(store)
    await store.save_responses(
        [
            stored("resp_old", team, expires_in=timedelta(seconds=-1)),
            stored("resp_new", team, expires_in=timedelta(days=1)),
        ]
    )
    assert await store.find_response("resp_old", team) is None
    assert await store.prune_responses() == 1
    assert await store.find_response("resp_new", team) is not None


async def test_the_book_writes_behind_and_finds_before_the_write(store: SqlStore) -> None:  # noqa: F811
    team, others = await two_groups(store)
    book = ResponseBook(store, ResponsesSettings(flush_seconds=0.05))
    book.start()
    try:
        book.keep(stored("resp_w", team, expires_in=timedelta(days=1)))
        # found at once, from memory, by its group only
        assert (await book.find("resp_w", team)) is not None
        assert await book.find("resp_w", others) is None
        for _ in range(100):
            if await store.find_response("resp_w", team) is not None:
                break
            await asyncio.sleep(0.02)
        assert await store.find_response("resp_w", team) is not None
        book.keep(stored("resp_gone", team, expires_in=timedelta(days=1)))
        assert not await book.delete("resp_gone", others)
        assert await book.delete("resp_gone", team)
        await asyncio.sleep(0.2)
        assert await book.find("resp_gone", team) is None
        assert await store.find_response("resp_gone", team) is None
    finally:
        await book.close(5)


async def test_the_book_writes_what_waits_when_it_closes(store: SqlStore) -> None:  # noqa: F811
    team, _ = await two_groups(store)
    book = ResponseBook(store, ResponsesSettings(flush_seconds=60))
    book.keep(stored("resp_late", team, expires_in=timedelta(days=1)))
    await book.close(5)
    assert await store.find_response("resp_late", team) is not None
