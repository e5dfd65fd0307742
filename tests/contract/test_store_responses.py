"""Stored responses in the store, on SQLite and PostgreSQL alike: saved once (a replayed
batch adds nothing), found only by their own group and only until they expire, deleted
by their own group, pruned after expiry; and the ``ResponseBook`` in front of them,
which spills what the store does not take at shutdown and writes it at the next start."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from parley.api.responses_request import earlier_turns
from parley.domain.responses import TURNS_PER_COPY, StoredResponse
from parley.runtime.response_book import ResponseBook
from parley.settings import ResponsesSettings
from parley.store.base import ResponseStore, StoreUnavailable
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


def spills(directory: Path) -> list[Path]:
    """Spill files of stored responses, and files being replayed."""
    return sorted(directory.glob("parley-responses-spill-*"))


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


async def test_the_book_writes_behind_and_finds_before_the_write(
    store: SqlStore,  # noqa: F811
    tmp_path: Path,
) -> None:
    team, others = await two_groups(store)
    book = ResponseBook(store, ResponsesSettings(flush_seconds=0.05), tmp_path)
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


async def test_the_book_writes_what_waits_when_it_closes(
    store: SqlStore,  # noqa: F811
    tmp_path: Path,
) -> None:
    team, _ = await two_groups(store)
    book = ResponseBook(store, ResponsesSettings(flush_seconds=60), tmp_path)
    book.keep(stored("resp_late", team, expires_in=timedelta(days=1)))
    await book.close(5)
    assert await store.find_response("resp_late", team) is not None
    assert not spills(tmp_path)


class HungWrites:
    """The store in front of a database that takes no write: each one waits forever
    (``hang``) or is refused at once."""

    def __init__(self, inner: SqlStore, *, hang: bool) -> None:
        self.inner = inner
        self.hang = hang
        self.writing = asyncio.Event()

    async def save_responses(self, responses: Sequence[StoredResponse]) -> int:
        self.writing.set()
        if self.hang:
            await asyncio.Event().wait()
        raise StoreUnavailable("connection refused")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("hang", [True, False], ids=["hung", "down"])
async def test_what_the_store_does_not_take_at_shutdown_is_spilled_and_replayed_once(
    store: SqlStore,  # noqa: F811
    tmp_path: Path,
    hang: bool,
) -> None:
    """The callers have these ids: a database hung or down at shutdown loses none (the
    batch in flight included), and the next start writes each once, however often the
    spill is replayed."""
    team, _ = await two_groups(store)
    failing = HungWrites(store, hang=hang)
    book = ResponseBook(
        cast(ResponseStore, failing), ResponsesSettings(flush_seconds=0.01), tmp_path
    )
    book.start()
    ids = [f"resp_spilled{n}" for n in range(6)]
    for response_id in ids:
        book.keep(stored(response_id, team, expires_in=timedelta(days=1)))
    await asyncio.wait_for(failing.writing.wait(), 5)  # a write is in flight (or failed)
    await asyncio.wait_for(book.close(0.2), 5)

    (spill,) = spills(tmp_path)
    assert len(spill.read_bytes().splitlines()) == len(ids)
    kept = tmp_path / "kept"
    shutil.copy(spill, kept)
    assert all([await store.find_response(r, team) is None for r in ids])

    restarted = ResponseBook(store, ResponsesSettings(), tmp_path)
    await restarted.replay_spills()
    assert not spills(tmp_path)
    for response_id in ids:
        found = await restarted.find(response_id, team)
        assert found is not None and found.created_at.tzinfo is not None
    # a start that died between the write and the file's removal replays it again
    kept.rename(spill)
    await ResponseBook(store, ResponsesSettings(), tmp_path).replay_spills()
    assert not spills(tmp_path)
    assert await store.prune_responses() == 0
    assert sum([await store.delete_response(r, team) for r in ids]) == len(ids)


async def test_a_spill_the_store_refuses_is_kept_for_the_next_start(
    store: SqlStore,  # noqa: F811
    tmp_path: Path,
) -> None:
    team, _ = await two_groups(store)
    failing = HungWrites(store, hang=False)
    down = ResponseBook(cast(ResponseStore, failing), ResponsesSettings(), tmp_path)
    down.keep(stored("resp_later", team, expires_in=timedelta(days=1)))
    await down.close(1)
    await ResponseBook(cast(ResponseStore, failing), ResponsesSettings(), tmp_path).replay_spills()
    assert len(spills(tmp_path)) == 1
    await ResponseBook(store, ResponsesSettings(), tmp_path).replay_spills()
    assert await store.find_response("resp_later", team) is not None


async def test_a_full_book_is_overloaded_and_still_keeps(tmp_path: Path) -> None:
    """Past ``queue_size`` the book refuses new calls (``overloaded``) but never drops
    one whose caller already has its id."""
    book = ResponseBook(cast(ResponseStore, None), ResponsesSettings(queue_size=2), tmp_path)
    book.keep(stored("resp_1", 1, expires_in=timedelta(days=1)))
    assert not book.overloaded
    for n in (2, 3):
        book.keep(stored(f"resp_{n}", 1, expires_in=timedelta(days=1)))
        assert book.overloaded
    assert all([await book.find(f"resp_{n}", 1) for n in (1, 2, 3)])


def turn(
    response_id: str, group_id: int, previous: str | None, **times: timedelta
) -> StoredResponse:
    """One turn of a conversation: its own input and output, naming the one before."""
    now = datetime.now(UTC)
    return StoredResponse(
        id=response_id,
        group_id=group_id,
        model="gpt-like",
        response=orjson.dumps(
            {"id": response_id, "output": [{"id": f"out_{response_id}"}]}
        ).decode(),
        input_items=orjson.dumps([{"id": f"in_{response_id}", "type": "message"}]).decode(),
        history="[]",
        created_at=now,
        expires_at=now + times.get("expires_in", timedelta(days=1)),
        previous_response_id=previous,
    )


def chain(group_id: int, length: int, first: int = 0) -> list[StoredResponse]:
    ids = [f"resp_t{n}" for n in range(first, first + length)]
    return [turn(i, group_id, ids[n - 1] if n else None) for n, i in enumerate(ids)]


async def test_a_conversation_is_read_back_from_its_newest_turn_in_one_walk(
    store: SqlStore,  # noqa: F811
) -> None:
    team, others = await two_groups(store)
    await store.save_responses(chain(team, 5))
    found = await store.find_turns("resp_t4", team, 100)
    assert [t.id for t in found] == ["resp_t4", "resp_t3", "resp_t2", "resp_t1", "resp_t0"]
    assert found[0].previous_response_id == "resp_t3" and found[-1].previous_response_id is None
    assert [t.id for t in await store.find_turns("resp_t4", team, 2)] == ["resp_t4", "resp_t3"]
    assert [t.id for t in await store.find_turns("resp_t1", team, 100)] == ["resp_t1", "resp_t0"]
    assert await store.find_turns("resp_t4", others, 100) == []
    assert await store.find_turns("resp_none", team, 100) == []


async def test_a_row_stored_with_a_copy_of_its_history_is_read_as_it_is(
    store: SqlStore,  # noqa: F811
) -> None:
    """Rows from before turns named each other (and every TURNS_PER_COPY-th turn) keep the
    earlier items in ``history`` and name no previous turn: the walk ends there."""
    team, _ = await two_groups(store)
    legacy = dataclasses.replace(
        turn("resp_old", team, None), history='[{"id": "in_before"}, {"id": "out_before"}]'
    )
    await store.save_responses([legacy, turn("resp_next", team, "resp_old")])
    found = await store.find_turns("resp_next", team, 100)
    assert [t.id for t in found] == ["resp_next", "resp_old"]
    assert orjson.loads(found[1].history) == [{"id": "in_before"}, {"id": "out_before"}]


async def test_an_earlier_turn_outlives_its_expiry_and_deletion_while_continued(
    store: SqlStore,  # noqa: F811
) -> None:
    team, others = await two_groups(store)
    expired = timedelta(seconds=-1)
    await store.save_responses(
        [
            turn("resp_a", team, None, expires_in=expired),
            turn("resp_b", team, "resp_a"),
            turn("resp_c", team, "resp_b"),
            turn("resp_alone", team, None),
        ]
    )
    assert not await store.delete_response("resp_b", others)
    assert await store.delete_response("resp_b", team)
    assert not await store.delete_response("resp_b", team)  # deleted is deleted
    assert await store.find_response("resp_b", team) is None
    assert await store.find_response("resp_a", team) is None  # expired
    assert await store.find_turns("resp_b", team, 100) == []
    assert [t.id for t in await store.find_turns("resp_c", team, 100)] == [
        "resp_c",
        "resp_b",
        "resp_a",
    ]
    assert await store.prune_responses() == 0  # each is continued by one kept
    assert await store.delete_response("resp_alone", team)  # continued by none: gone
    assert await store.delete_response("resp_c", team)  # gone at once, as the last turn
    assert await store.prune_responses() == 2  # the turns it continued, newest first
    assert await store.find_turns("resp_c", team, 100) == []


async def test_every_so_many_turns_one_keeps_a_copy_and_the_walk_stays_bounded(
    store: SqlStore,  # noqa: F811
    tmp_path: Path,
) -> None:
    team, _ = await two_groups(store)
    book = ResponseBook(store, ResponsesSettings(), tmp_path)
    await store.save_responses(chain(team, 3))
    items, continues = await earlier_turns("resp_t2", team, book)
    assert continues == "resp_t2"
    assert [item["id"] for item in items] == [
        f"{kind}_resp_t{n}" for n in range(3) for kind in ("in", "out")
    ]
    await store.save_responses(chain(team, TURNS_PER_COPY - 2, first=2)[1:])
    longest = f"resp_t{TURNS_PER_COPY - 1}"
    items, continues = await earlier_turns(longest, team, book)
    assert continues is None  # the next turn keeps a copy of these items
    assert len(items) == 2 * TURNS_PER_COPY and items[0]["id"] == "in_resp_t0"
    # in memory, not yet written, the same
    book.keep(turn("resp_mem", team, "resp_t2"))
    items, continues = await earlier_turns("resp_mem", team, book)
    assert continues == "resp_mem" and len(items) == 8
