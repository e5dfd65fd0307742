"""The store contract: what ``open_store`` gives answers these the same way on SQLite and
PostgreSQL (on a SQLite file, ``SqliteServingStore``: its plain layer and the
``SqlStore`` it opens for the rest; ``SqlStore`` itself on PostgreSQL).

SQLite runs on a fresh file under ``tmp_path``. PostgreSQL (the suite's database,
named in ``tests/services.py``) gives each test a schema of its own, ``t_<random hex>``,
created here, passed to ``open_store(..., schema=...)`` (it becomes the connections'
``search_path``) and dropped afterwards, so tests can run in parallel under xdist.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text

from parley.domain.client_secrets import ClientSecret
from parley.domain.groups import Quota
from parley.domain.requests import RequestQuery
from parley.domain.usage import DailyUsage, UsageRecord
from parley.domain.voices import Clone
from parley.store.base import Conflict, GroupChanges, Missing, StoreUnavailable
from parley.store.engine import driver_url
from parley.store.sql import SqlStore, open_store
from tests.records import usage_record
from tests.services import POSTGRES_URL

PLUS_THREE = timezone(timedelta(hours=3))


@dataclass(frozen=True)
class StoreTarget:
    """Where a test's stores live: open as many stores on it as the test needs."""

    url: str
    schema: str | None = None

    async def open(self) -> SqlStore:
        return await open_store(self.url, schema=self.schema)


async def postgres_execute(sql: str) -> None:
    connection = await asyncpg.connect(POSTGRES_URL)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def new_postgres_schema() -> str:
    schema = f"t_{secrets.token_hex(8)}"
    try:
        await postgres_execute(f'CREATE SCHEMA "{schema}"')
    except (OSError, asyncpg.PostgresError) as error:
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL} ({error})")
    return schema


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store_target(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreTarget]:
    if request.param == "sqlite":
        yield StoreTarget(f"sqlite:///{tmp_path / 'parley.db'}")
        return
    schema = await new_postgres_schema()
    try:
        yield StoreTarget(POSTGRES_URL, schema)
    finally:
        await postgres_execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
async def store(store_target: StoreTarget) -> AsyncIterator[SqlStore]:
    opened = await store_target.open()
    await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


def at(day: int, hour: int = 12, minute: int = 0, second: int = 0, micro: int = 0) -> datetime:
    """A UTC instant in January 2024."""
    return datetime(2024, 1, day, hour, minute, second, micro, tzinfo=UTC)


def usage(
    request_id: str,
    created_at: datetime,
    *,
    group_id: int = 1,
    model: str = "gpt-x",
    prompt: int = 10,
    completion: int = 5,
    cost: int = 1_000,
) -> UsageRecord:
    return usage_record(
        request_id,
        created_at=created_at,
        group_id=group_id,
        key_id=7,
        model=model,
        prompt=prompt,
        completion=completion,
        cost=cost,
    )


def day_row(day: date, model: str, records: list[UsageRecord]) -> DailyUsage:
    """What the rollup must hold for ``records``."""
    return DailyUsage(
        day=day,
        model=model,
        requests=len(records),
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records),
        characters=sum(r.characters for r in records),
        audio_ms=sum(r.audio_ms for r in records),
        cost_nanos=sum(r.cost_nanos for r in records),
        cached_tokens=sum(r.cached_tokens for r in records),
        cache_write_tokens=sum(r.cache_write_tokens for r in records),
    )


def digest_of(label: str) -> str:
    return label.encode().hex().ljust(64, "0")


# migrations


async def test_migrate_twice_keeps_data(store: SqlStore) -> None:
    await store.create_group("alpha")
    await store.migrate()
    assert [g.name for g in await store.list_groups()] == ["alpha"]


async def test_concurrent_first_migrations_both_succeed(store_target: StoreTarget) -> None:
    first, second = await store_target.open(), await store_target.open()
    try:
        await asyncio.gather(first.migrate(), second.migrate())
        await first.create_group("alpha")
        assert (await second.get_group("alpha")) is not None
    finally:
        await first.close()
        await second.close()


# groups


async def test_create_group_round_trips_every_field(store: SqlStore) -> None:
    before = datetime.now(UTC)
    created = await store.create_group(
        "alpha", quota=Quota(rpm=60, tpm=10_000), models=frozenset({"a", "b"}), budget_nanos=5
    )
    assert created.name == "alpha"
    assert created.quota == Quota(rpm=60, tpm=10_000)
    assert created.models == frozenset({"a", "b"})
    assert created.budget_nanos == 5
    assert created.created_at is not None
    assert created.created_at.tzinfo == UTC
    assert created.created_at >= before - timedelta(seconds=1)
    assert await store.get_group("alpha") == created


async def test_group_defaults_are_unlimited_and_every_model(store: SqlStore) -> None:
    created = await store.create_group("alpha")
    assert created.quota == Quota()
    assert created.models is None
    assert created.budget_nanos is None


async def test_empty_model_set_is_not_every_model(store: SqlStore) -> None:
    await store.create_group("locked", models=frozenset())
    found = await store.get_group("locked")
    assert found is not None
    assert found.models == frozenset()
    assert not found.may_use("gpt-x")


async def test_duplicate_group_name_is_a_conflict(store: SqlStore) -> None:
    await store.create_group("alpha")
    with pytest.raises(Conflict):
        await store.create_group("alpha", quota=Quota(rpm=1))
    assert len(await store.list_groups()) == 1


async def test_unknown_group_is_none(store: SqlStore) -> None:
    assert await store.get_group("nobody") is None


async def test_list_groups_in_creation_order(store: SqlStore) -> None:
    for name in ("zeta", "alpha", "mid"):
        await store.create_group(name)
    assert [g.name for g in await store.list_groups()] == ["zeta", "alpha", "mid"]


async def test_update_group_changes_only_given_fields(store: SqlStore) -> None:
    created = await store.create_group(
        "alpha", quota=Quota(rpm=1, tpm=2), models=frozenset({"a"}), budget_nanos=3
    )
    updated = await store.update_group("alpha", GroupChanges(tpm=20, models=frozenset({"b"})))
    assert updated.id == created.id
    assert updated.quota == Quota(rpm=1, tpm=20)
    assert updated.models == frozenset({"b"})
    assert updated.budget_nanos == 3
    assert await store.get_group("alpha") == updated


async def test_update_group_clear_flags(store: SqlStore) -> None:
    await store.create_group(
        "alpha", quota=Quota(rpm=1, tpm=2), models=frozenset({"a"}), budget_nanos=3
    )
    changes = GroupChanges(clear_rpm=True, clear_tpm=True, clear_models=True, clear_budget=True)
    updated = await store.update_group("alpha", changes)
    assert updated.quota == Quota()
    assert updated.models is None
    assert updated.budget_nanos is None


async def test_update_group_clear_wins_over_a_value(store: SqlStore) -> None:
    await store.create_group("alpha", quota=Quota(rpm=1))
    updated = await store.update_group("alpha", GroupChanges(rpm=5, clear_rpm=True))
    assert updated.quota.rpm is None


async def test_update_unknown_group_is_missing(store: SqlStore) -> None:
    with pytest.raises(Missing):
        await store.update_group("nobody", GroupChanges(rpm=1))


# keys


async def test_create_key_and_find_it_by_digest(store: SqlStore) -> None:
    group = await store.create_group("alpha")
    expires = datetime(2030, 1, 1, 3, 0, tzinfo=PLUS_THREE)
    created = await store.create_key(
        group.id,
        name="ci",
        digest=digest_of("ci"),
        prefix="pk-abcdefg",
        expires_at=expires,
        quota=Quota(rpm=5),
    )
    assert (created.group_id, created.name, created.prefix) == (group.id, "ci", "pk-abcdefg")
    assert created.quota == Quota(rpm=5, tpm=None)
    assert created.expires_at == expires
    assert created.expires_at is not None and created.expires_at.tzinfo == UTC
    assert created.created_at.tzinfo == UTC
    assert created.revoked_at is None
    assert await store.find_key(digest_of("ci")) == created
    assert await store.find_key(digest_of("other")) is None


async def test_create_key_for_unknown_group_is_missing(store: SqlStore) -> None:
    with pytest.raises(Missing):
        await store.create_key(999, name="k", digest=digest_of("k"), prefix="pk-")
    assert await store.list_keys() == []


async def test_duplicate_digest_is_a_conflict(store: SqlStore) -> None:
    group = await store.create_group("alpha")
    await store.create_key(group.id, name="one", digest=digest_of("k"), prefix="pk-")
    with pytest.raises(Conflict):
        await store.create_key(group.id, name="two", digest=digest_of("k"), prefix="pk-")


async def test_list_keys_all_and_per_group_by_id(store: SqlStore) -> None:
    alpha = await store.create_group("alpha")
    beta = await store.create_group("beta")
    ids = []
    for label, group in (("a1", alpha), ("b1", beta), ("a2", alpha)):
        key = await store.create_key(group.id, name=label, digest=digest_of(label), prefix="pk-")
        ids.append(key.id)
    assert [k.id for k in await store.list_keys()] == sorted(ids)
    assert [k.name for k in await store.list_keys(alpha.id)] == ["a1", "a2"]
    assert [k.name for k in await store.list_keys(beta.id)] == ["b1"]
    assert await store.list_keys(999) == []


async def test_revoke_twice_keeps_the_first_time(store: SqlStore) -> None:
    group = await store.create_group("alpha")
    key = await store.create_key(group.id, name="k", digest=digest_of("k"), prefix="pk-")
    first = datetime(2024, 5, 1, 15, 0, tzinfo=PLUS_THREE)
    revoked = await store.revoke_key(key.id, first)
    assert revoked.revoked_at == first
    assert revoked.revoked_at is not None and revoked.revoked_at.tzinfo == UTC
    again = await store.revoke_key(key.id, first + timedelta(days=1))
    assert again.revoked_at == first
    assert again == revoked
    found = await store.find_key(digest_of("k"))
    assert found is not None and not found.usable_at(datetime.now(UTC))


async def test_revoke_unknown_key_is_missing(store: SqlStore) -> None:
    with pytest.raises(Missing):
        await store.revoke_key(999, datetime.now(UTC))


async def test_keys_changed_since(store: SqlStore) -> None:
    group = await store.create_group("alpha")
    old = await store.create_key(group.id, name="old", digest=digest_of("old"), prefix="pk-")
    kept = await store.create_key(group.id, name="kept", digest=digest_of("kept"), prefix="pk-")
    await asyncio.sleep(0.005)
    since = datetime.now(UTC)
    await asyncio.sleep(0.005)
    await store.revoke_key(old.id, datetime.now(UTC))
    new = await store.create_key(group.id, name="new", digest=digest_of("new"), prefix="pk-")
    changed = await store.keys_changed_since(since)
    assert [k.id for k in changed] == [old.id, new.id]
    assert changed[0].revoked_at is not None
    everything = await store.keys_changed_since(datetime(2000, 1, 1, tzinfo=UTC))
    assert [k.id for k in everything] == [old.id, kept.id, new.id]
    assert await store.keys_changed_since(datetime.now(UTC) + timedelta(seconds=5)) == []


# usage


async def test_record_usage_counts_new_records(store: SqlStore) -> None:
    assert await store.record_usage([]) == 0
    assert await store.record_usage([usage("r1", at(1)), usage("r2", at(1))]) == 2
    assert await store.count_usage() == 2


async def test_prompt_cache_counts_are_kept_in_records_and_rollups(store: SqlStore) -> None:
    cached = replace(usage("c1", at(1)), prompt_tokens=1202, cached_tokens=1000)
    written = replace(usage("c2", at(1)), prompt_tokens=300, cache_write_tokens=200)
    plain = usage("c3", at(1))
    assert await store.record_usage([cached, written]) == 2
    assert await store.record_usage([plain]) == 1  # a batch without any: the columns' 0
    rows = await store.daily_usage(1, date(2024, 1, 1), date(2024, 1, 2))
    assert rows == [day_row(date(2024, 1, 1), "gpt-x", [cached, written, plain])]
    assert (rows[0].cached_tokens, rows[0].cache_write_tokens) == (1000, 200)


async def test_duplicates_in_one_batch_count_once(store: SqlStore) -> None:
    first = usage("r1", at(1), cost=100)
    batch = [first, usage("r2", at(1), cost=10), replace(first, cost_nanos=999_999)]
    assert await store.record_usage(batch) == 2
    assert await store.count_usage() == 2
    rows = await store.daily_usage(1, date(2024, 1, 1), date(2024, 1, 2))
    assert rows == [day_row(date(2024, 1, 1), "gpt-x", batch[:2])]


async def test_duplicates_across_batches_do_not_double_count_rollups(store: SqlStore) -> None:
    batch = [usage(f"r{i}", at(1, minute=i)) for i in range(5)]
    assert await store.record_usage(batch[:3]) == 3
    assert await store.record_usage(batch) == 2
    assert await store.record_usage(batch) == 0
    assert await store.count_usage() == 5
    rows = await store.daily_usage(1, date(2024, 1, 1), date(2024, 1, 2))
    assert rows == [day_row(date(2024, 1, 1), "gpt-x", batch)]


async def test_a_stored_id_late_in_a_large_batch_leaves_the_others_counted_once(
    store: SqlStore,
) -> None:
    """The stored id comes after a few hundred new ones (SQLite's writer has inserted
    whole statements of rows by then, and starts over without the stored one)."""
    batch = [usage(f"r{i:03d}", at(1, minute=i % 60), cost=1 + i) for i in range(300)]
    assert await store.record_usage(batch[-1:]) == 1
    assert await store.record_usage(batch) == 299
    assert await store.record_usage(batch) == 0
    assert await store.count_usage() == 300
    rows = await store.daily_usage(1, date(2024, 1, 1), date(2024, 1, 2))
    assert rows == [day_row(date(2024, 1, 1), "gpt-x", batch)]


async def test_rollups_per_group_utc_day_and_model(store: SqlStore) -> None:
    before_midnight = usage("a", at(1, 23, 59, 59, 999_999), cost=1)
    at_midnight = usage("b", at(2, 0, 0, 0), cost=2)
    other_model = usage("c", at(2, 0, 30), model="alpha-model", cost=4)
    # 02:00 on the 2nd at UTC+3 is 23:00 on the 1st in UTC
    east = usage("d", datetime(2024, 1, 2, 2, 0, tzinfo=PLUS_THREE), cost=8)
    other_group = usage("e", at(1), group_id=2, cost=16)
    await store.record_usage([before_midnight, at_midnight, other_model, east, other_group])
    assert await store.daily_usage(1, date(2024, 1, 1), date(2024, 1, 3)) == [
        day_row(date(2024, 1, 1), "gpt-x", [before_midnight, east]),
        day_row(date(2024, 1, 2), "alpha-model", [other_model]),
        day_row(date(2024, 1, 2), "gpt-x", [at_midnight]),
    ]
    assert await store.daily_usage(2, date(2024, 1, 1), date(2024, 1, 3)) == [
        day_row(date(2024, 1, 1), "gpt-x", [other_group])
    ]


async def test_daily_usage_range_end_is_exclusive(store: SqlStore) -> None:
    records = [usage(f"r{day}", at(day), cost=day) for day in range(1, 8)]
    await store.record_usage(records)
    rows = await store.daily_usage(1, date(2024, 1, 3), date(2024, 1, 6))
    assert [row.day for row in rows] == [date(2024, 1, d) for d in (3, 4, 5)]
    assert await store.daily_usage(1, date(2024, 1, 3), date(2024, 1, 3)) == []
    assert await store.daily_usage(3, date(2024, 1, 1), date(2024, 2, 1)) == []


async def test_spend_since_sums_cost_per_group(store: SqlStore) -> None:
    await store.record_usage(
        [
            usage("old", at(1), cost=1_000_000),
            usage("a", at(2, 0, 0), cost=3),
            usage("b", at(5), model="other", cost=4),
            usage("c", at(3), group_id=2, cost=10**15),
            usage("d", at(1, 23, 59), group_id=3, cost=7),
        ]
    )
    assert await store.spend_since(date(2024, 1, 2)) == {1: 7, 2: 10**15}
    assert await store.spend_since(date(2024, 2, 1)) == {}


async def test_count_usage_per_group(store: SqlStore) -> None:
    await store.record_usage([usage("a", at(1)), usage("b", at(1)), usage("c", at(1), group_id=2)])
    assert await store.count_usage() == 3
    assert await store.count_usage(1) == 2
    assert await store.count_usage(2) == 1
    assert await store.count_usage(9) == 0


async def test_prune_deletes_old_raw_records_and_keeps_rollups(store: SqlStore) -> None:
    records = [usage(f"r{day}", at(day), cost=day) for day in range(1, 6)]
    await store.record_usage(records)
    rollups = await store.daily_usage(1, date(2024, 1, 1), date(2024, 2, 1))
    assert await store.prune_usage(at(3)) == 2
    assert await store.count_usage() == 3
    assert await store.prune_usage(at(3)) == 0
    assert await store.daily_usage(1, date(2024, 1, 1), date(2024, 2, 1)) == rollups
    assert await store.spend_since(date(2024, 1, 1)) == {1: 15}


async def test_pruned_record_replayed_is_new_again(store: SqlStore) -> None:
    """Retention is the dedup window: a replay older than it counts again, by design."""
    await store.record_usage([usage("r", at(1))])
    await store.prune_usage(at(2))
    assert await store.record_usage([usage("r", at(1))]) == 1


async def test_concurrent_writers_count_each_record_once(store_target: StoreTarget) -> None:
    first, second = await store_target.open(), await store_target.open()
    await first.migrate()
    models = ("m1", "m2", "m3")
    records = [
        usage(f"req-{i:04d}", at(1 + i % 3, hour=i % 24), model=models[i % 3], cost=i)
        for i in range(600)
    ]
    left, right = records[:400], records[200:]
    random.Random(7).shuffle(right)
    try:
        counts = await asyncio.gather(
            *(first.record_usage(left[i : i + 50]) for i in range(0, len(left), 50)),
            *(second.record_usage(right[i : i + 50]) for i in range(0, len(right), 50)),
        )
        assert sum(counts) == len(records)
        assert await first.count_usage() == len(records)
        rows = await second.daily_usage(1, date(2024, 1, 1), date(2024, 1, 4))
        expected = [
            day_row(date(2024, 1, day), model, [r for r in records if r.model == model])
            for day, model in zip((1, 2, 3), models, strict=True)
        ]
        assert rows == expected
        assert await second.spend_since(date(2024, 1, 1)) == {1: sum(range(600))}
    finally:
        await first.close()
        await second.close()


# opening


def test_urls_get_their_drivers() -> None:
    assert driver_url("sqlite:///./parley.db").drivername == "sqlite+pysqlite"
    assert driver_url("sqlite:///./parley.db").database == "./parley.db"
    assert driver_url("postgres://u@db:5433/p").drivername == "postgresql+asyncpg"
    pg = driver_url("postgresql://u:secret@db:5433/p")
    assert (pg.drivername, pg.host, pg.port, pg.database) == ("postgresql+asyncpg", "db", 5433, "p")
    with pytest.raises(ValueError, match="unsupported"):
        driver_url("mysql://u@db/p")


async def test_schema_is_refused_on_sqlite(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="PostgreSQL"):
        await open_store(f"sqlite:///{tmp_path / 'x.db'}", schema="elsewhere")


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
async def test_memory_sqlite_keeps_data_between_calls(url: str) -> None:
    store = await open_store(url)
    try:
        await store.migrate()
        await store.create_group("alpha")
        assert [g.name for g in await store.list_groups()] == ["alpha"]
    finally:
        await store.close()


async def test_sqlite_file_uses_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
    try:
        await store.migrate()  # switches the file to WAL, which the file then keeps
        pragmas = ("journal_mode", "busy_timeout", "foreign_keys")
        found = await store.database.read(
            lambda conn: tuple(conn.execute(text(f"PRAGMA {p}")).scalar_one() for p in pragmas)
        )
        assert found == ("wal", 5000, 1)
    finally:
        await store.close()


# voice clones


def clone(group_id: int, label: str, *, model: str = "tts-pro", channel: str = "omni") -> Clone:
    return Clone(
        group_id=group_id,
        model=model,
        label=label,
        voice_id=f"g{group_id}__{label}",
        engine_name=f"g{group_id}__{label}".lower(),
        channel=channel,
        duration_ms=4250,
        created_at=at(3, micro=5),
        transcript="hello there" if label == "Anna" else None,
        consent="cons_1234" if label == "Anna" else None,
    )


async def test_clones_round_trip_and_are_listed_per_model_and_group(store: SqlStore) -> None:
    one, two = await store.create_group("one"), await store.create_group("two")
    anna = await store.add_clone(clone(one.id, "Anna"))
    await store.add_clone(clone(one.id, "bob", model="tts-other"))
    await store.add_clone(clone(two.id, "carl"))
    assert await store.list_clones(model="tts-pro", group_id=one.id) == [anna]
    assert [c.label for c in await store.list_clones(model="tts-pro")] == ["Anna", "carl"]
    assert [c.label for c in await store.list_clones(group_id=one.id)] == ["Anna", "bob"]
    assert len(await store.list_clones()) == 3


async def test_a_clone_id_is_unique_per_model(store: SqlStore) -> None:
    group = await store.create_group("one")
    await store.add_clone(clone(group.id, "anna"))
    with pytest.raises(Conflict):
        await store.add_clone(clone(group.id, "anna", channel="elsewhere"))
    await store.add_clone(clone(group.id, "anna", model="tts-other"))
    assert len(await store.list_clones()) == 2


async def test_deleting_a_clone_says_whether_it_existed(store: SqlStore) -> None:
    group = await store.create_group("one")
    await store.add_clone(clone(group.id, "anna"))
    assert await store.delete_clone("tts-other", f"g{group.id}__anna") is False
    assert await store.delete_clone("tts-pro", f"g{group.id}__anna") is True
    assert await store.delete_clone("tts-pro", f"g{group.id}__anna") is False
    assert await store.list_clones() == []


def _unreachable_urls(tmp_path: Path) -> list[str]:
    with socket.socket() as probe:  # a port nothing listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A file that is not a database.
    broken = tmp_path / "parley.db"
    broken.write_bytes(b"not a database at all " * 100)
    return [f"postgresql://postgres@127.0.0.1:{port}/test", f"sqlite:///{broken}"]


@pytest.mark.parametrize("which", ["postgres", "sqlite"])
async def test_an_unreachable_database_raises_store_unavailable_from_every_method(
    which: str, tmp_path: Path
) -> None:
    """The drivers' exceptions (ConnectionRefusedError, sqlite3's, SQLAlchemy's) never
    leave the store: callers handle one ``StoreUnavailable``, without naming SQLAlchemy."""
    url = _unreachable_urls(tmp_path)[which == "sqlite"]
    store = await open_store(url)
    calls = {
        "migrate": store.migrate(),
        "create_group": store.create_group("team"),
        "update_group": store.update_group("team", GroupChanges(rpm=1)),
        "get_group": store.get_group("team"),
        "list_groups": store.list_groups(),
        "create_key": store.create_key(1, name="k", digest="d", prefix="p"),
        "find_key": store.find_key("d"),
        "list_keys": store.list_keys(),
        "revoke_key": store.revoke_key(1, datetime.now(UTC)),
        "keys_changed_since": store.keys_changed_since(datetime.now(UTC)),
        "record_usage": store.record_usage([usage_record("r-1")]),
        "daily_usage": store.daily_usage(1, date(2026, 1, 1), date(2026, 2, 1)),
        "spend_since": store.spend_since(date(2026, 1, 1)),
        "count_usage": store.count_usage(),
        "prune_usage": store.prune_usage(datetime.now(UTC)),
        "failures_by_day": store.failures_by_day(datetime.now(UTC)),
        "list_requests": store.list_requests(RequestQuery()),
        "find_request": store.find_request("r-1"),
        "find_client_secret": store.find_client_secret("d"),
    }
    try:
        for name, pending in calls.items():
            with pytest.raises(StoreUnavailable) as raised:
                await pending
            assert raised.value.reason, name
            assert "[SQL" not in str(raised.value), name
    finally:
        await store.close()


async def test_client_secrets_are_kept_by_digest_and_pruned_once_expired(
    store: SqlStore,
) -> None:
    group = await store.create_group("one")
    key = await store.create_key(group.id, name="k", digest=digest_of("k"), prefix="pk-")
    now = datetime.now(UTC).replace(microsecond=0)
    live = ClientSecret(
        digest_of("ek_live"),
        key.id,
        group.id,
        "voice",
        {"type": "realtime", "instructions": "Be brief.", "audio": {"output": {"voice": "marin"}}},
        now,
        now + timedelta(minutes=10),
    )
    old = ClientSecret(digest_of("ek_old"), key.id, group.id, None, None, now, now)
    await store.add_client_secret(live)
    await store.add_client_secret(old)
    assert await store.find_client_secret(live.digest) == live
    assert await store.find_client_secret(digest_of("ek_other")) is None
    assert await store.prune_client_secrets(now + timedelta(seconds=1)) == 1
    assert await store.find_client_secret(old.digest) is None
    assert await store.find_client_secret(live.digest) == live
