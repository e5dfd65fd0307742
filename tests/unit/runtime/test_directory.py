"""The directory never lets a stale refresh undo what this instance was just told."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from parley.domain.keys import digest
from parley.errors import ServiceUnavailable
from parley.runtime.directory import Directory
from parley.store.base import StoreUnavailable
from parley.store.sql import SqlStore, open_store


class SlowStore:
    """The real store, pausing after a refresh has read (so what it holds goes stale)."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.reading = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    async def _pause(self) -> None:
        self.reading.set()
        await self.release.wait()

    async def list_groups(self) -> object:
        groups = await self.store.list_groups()
        await self._pause()
        return groups

    async def keys_changed_since(self, since: datetime) -> object:
        keys = await self.store.keys_changed_since(since)
        await self._pause()
        return keys


async def test_group_created_during_a_refresh_survives_it(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    slow = SlowStore(store)
    directory = Directory(slow, refresh_seconds=1)  # type: ignore[arg-type]
    refresh = asyncio.create_task(directory.load())
    await slow.reading.wait()
    group = await store.create_group("late")
    directory.remember_group(group)
    slow.release.set()
    await refresh
    assert directory.group(group.id) == group
    await store.close()


async def test_key_revoked_during_a_refresh_stays_revoked(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    group = await store.create_group("team")
    record = await store.create_key(group.id, name="k", digest=digest("pk-x"), prefix="pk-x")
    slow = SlowStore(store)
    directory = Directory(slow, refresh_seconds=1)  # type: ignore[arg-type]
    slow.release.set()
    await directory.load()
    slow.release.clear()
    slow.reading.clear()
    refresh = asyncio.create_task(directory.load())
    await slow.reading.wait()  # paused after reading the groups
    slow.reading.clear()
    slow.release.set()
    slow.release = asyncio.Event()
    await slow.reading.wait()  # paused after reading the keys: its copy is about to go stale
    revoked = await store.revoke_key(record.id, datetime.now(UTC))
    directory.remember_key(revoked)
    slow.release.set()
    await refresh
    cached = directory.cached_key(record.digest)
    assert cached is not None and cached.revoked_at is not None
    await store.close()


class CountingStore:
    """The real store, counting the key look-ups that reach it."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.find_key_calls = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    async def find_key(self, wanted: str) -> object:
        self.find_key_calls += 1
        return await self.store.find_key(wanted)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


FLOOD = 2000
BUDGET = 20


async def test_a_flood_of_distinct_wrong_keys_costs_the_store_a_bounded_number_of_lookups(
    tmp_path: Path,
) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    counting, clock = CountingStore(store), Clock()
    directory = Directory(
        counting,  # type: ignore[arg-type]
        refresh_seconds=2,
        unknown_lookups_per_second=BUDGET,
        clock=clock,
    )
    await directory.load()

    found = [await directory.find_key(digest(f"pk-wrong-{n}")) for n in range(FLOOD)]
    assert found == [None] * FLOOD
    assert counting.find_key_calls == BUDGET  # one second's worth, then none
    assert directory.lookups_refused == FLOOD - BUDGET

    clock.now += 0.5  # the budget refills at BUDGET a second
    for n in range(FLOOD):
        await directory.find_key(digest(f"pk-second-wave-{n}"))
    assert counting.find_key_calls == BUDGET + BUDGET // 2
    await store.close()


async def test_past_the_budget_a_new_key_works_from_the_next_refresh(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    counting, clock = CountingStore(store), Clock()
    directory = Directory(
        counting,  # type: ignore[arg-type]
        refresh_seconds=2,
        unknown_lookups_per_second=1,
        clock=clock,
    )
    await directory.load()
    group = await store.create_group("team")
    record = await store.create_key(group.id, name="k", digest=digest("pk-new"), prefix="pk-n")
    assert await directory.find_key(digest("pk-wrong")) is None  # spends the budget
    assert await directory.find_key(record.digest) is None  # refused without a look-up
    assert counting.find_key_calls == 1

    await directory.load()  # the refresh loop's next pass
    assert await directory.find_key(record.digest) == record
    assert counting.find_key_calls == 1
    await store.close()


class HeldLookups(CountingStore):
    """Key look-ups that wait for ``release`` (a slow database), or fail when ``down``."""

    def __init__(self, store: SqlStore) -> None:
        super().__init__(store)
        self.release = asyncio.Event()
        self.down = False

    async def find_key(self, wanted: str) -> object:
        self.find_key_calls += 1
        await self.release.wait()
        if self.down:
            raise StoreUnavailable("refused")
        return await self.store.find_key(wanted)


async def test_concurrent_calls_with_one_new_key_share_one_lookup_and_one_budget_token(
    tmp_path: Path,
) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    held, clock = HeldLookups(store), Clock()
    directory = Directory(
        held,  # type: ignore[arg-type]
        refresh_seconds=2,
        unknown_lookups_per_second=1,
        clock=clock,
    )
    await directory.load()
    group = await store.create_group("team")
    record = await store.create_key(group.id, name="k", digest=digest("pk-new"), prefix="pk-n")

    callers = [asyncio.create_task(directory.find_key(record.digest)) for _ in range(50)]
    await asyncio.sleep(0.01)
    callers[0].cancel()  # the caller that started the look-up leaves: the others still get it
    held.release.set()
    found = await asyncio.gather(*callers[1:])

    assert found == [record] * 49
    assert held.find_key_calls == 1
    assert directory.lookups_refused == 0
    assert directory.group(group.id) is not None
    await store.close()


async def test_callers_sharing_a_lookup_the_store_refused_each_get_a_503(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    held = HeldLookups(store)
    held.down = True
    directory = Directory(held, refresh_seconds=2)  # type: ignore[arg-type]
    await directory.load()

    callers = [asyncio.create_task(directory.find_key(digest("pk-any"))) for _ in range(5)]
    await asyncio.sleep(0.01)
    held.release.set()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)

    assert all(isinstance(outcome, ServiceUnavailable) for outcome in outcomes)
    assert len({id(outcome) for outcome in outcomes}) == 5  # one error each, never shared
    assert held.find_key_calls == 1
    held.down = False
    assert await directory.find_key(digest("pk-any")) is None  # not remembered as unknown
    assert held.find_key_calls == 2
    await store.close()
