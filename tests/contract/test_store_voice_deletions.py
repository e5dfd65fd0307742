"""Retired clones and the deletions still to do on their engines, the same on SQLite and
PostgreSQL: retiring moves a clone out of the registry in one transaction, one claim
wins, a failure is counted with its error, and a finished deletion is gone."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from parley.store.sql import SqlStore
from tests.contract.test_store import clone, store, store_target  # noqa: F401

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
CLAIM = timedelta(minutes=5)


async def test_retiring_moves_the_clone_out_of_the_registry_once(store: SqlStore) -> None:  # noqa: F811
    group = await store.create_group("one")
    anna = await store.add_clone(clone(group.id, "Anna"))
    pending = await store.retire_clone(anna, NOW, NOW + CLAIM)
    assert pending is not None and pending.id > 0
    assert (pending.voice_id, pending.engine_name, pending.channel) == (
        anna.voice_id,
        anna.engine_name,
        anna.channel,
    )
    assert (pending.attempts, pending.last_error, pending.last_attempt_at) == (0, None, None)
    assert await store.list_clones() == []
    assert await store.list_deletions() == [pending]
    assert await store.retire_clone(anna, NOW, NOW + CLAIM) is None, "already retired"
    assert len(await store.list_deletions()) == 1


async def test_deletions_are_listed_per_model_and_group(store: SqlStore) -> None:  # noqa: F811
    one, two = await store.create_group("one"), await store.create_group("two")
    for made in (clone(one.id, "a"), clone(one.id, "b", model="tts-other"), clone(two.id, "c")):
        await store.retire_clone(await store.add_clone(made), NOW, NOW)
    assert [d.label for d in await store.list_deletions(model="tts-pro")] == ["a", "c"]
    assert [d.label for d in await store.list_deletions(group_id=one.id)] == ["a", "b"]
    assert [d.label for d in await store.list_deletions(model="tts-pro", group_id=two.id)] == ["c"]


async def test_one_claim_wins_and_only_while_the_deletion_is_due(store: SqlStore) -> None:  # noqa: F811
    group = await store.create_group("one")
    pending = await store.retire_clone(await store.add_clone(clone(group.id, "a")), NOW, NOW)
    assert pending is not None
    early = NOW - timedelta(seconds=1)
    assert await store.claim_deletion(pending.id, early, early + CLAIM, due=True) is None
    claims = await asyncio.gather(
        *(store.claim_deletion(pending.id, NOW, NOW + CLAIM, due=True) for _ in range(4))
    )
    won = [claim for claim in claims if claim is not None]
    assert len(won) == 1 and won[0].next_attempt_at == NOW + CLAIM
    assert await store.claim_deletion(pending.id, NOW, NOW + CLAIM, due=True) is None
    forced = await store.claim_deletion(pending.id, NOW, NOW + 2 * CLAIM, due=False)
    assert forced is not None and forced.next_attempt_at == NOW + 2 * CLAIM
    assert await store.claim_deletion(999_999, NOW, NOW, due=False) is None


async def test_failures_are_counted_and_a_finished_deletion_is_gone(store: SqlStore) -> None:  # noqa: F811
    group = await store.create_group("one")
    pending = await store.retire_clone(await store.add_clone(clone(group.id, "a")), NOW, NOW)
    assert pending is not None
    later = NOW + timedelta(seconds=30)
    first = await store.deletion_failed(pending.id, "HTTP 500: no", NOW, later)
    assert first is not None
    assert (first.attempts, first.last_error, first.last_attempt_at, first.next_attempt_at) == (
        1,
        "HTTP 500: no",
        NOW,
        later,
    )
    second = await store.deletion_failed(pending.id, "HTTP 503: still no", later, later)
    assert second is not None and second.attempts == 2 and second.last_error.endswith("still no")
    assert await store.find_deletion(pending.id) == second
    assert await store.finish_deletion(pending.id) is True
    assert await store.finish_deletion(pending.id) is False
    assert await store.find_deletion(pending.id) is None
    assert await store.deletion_failed(pending.id, "late", later, later) is None
    assert await store.list_deletions() == []


async def test_a_label_deleted_twice_is_two_deletions(store: SqlStore) -> None:  # noqa: F811
    """A voice id cloned again after its first deletion was given up, then deleted again:
    each deletion keeps its own engine name."""
    group = await store.create_group("one")
    first = clone(group.id, "a")
    await store.retire_clone(await store.add_clone(first), NOW, NOW)
    again = await store.add_clone(clone(group.id, "a", channel="other"))
    await store.retire_clone(again, NOW, NOW)
    assert [d.channel for d in await store.list_deletions()] == ["omni", "other"]
