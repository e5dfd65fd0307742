"""A SQLite file's two layers: the plain ``sqlite3`` one a worker serves with
(``store/sqlite_serving.py``) and ``SqlStore``, which it opens on first use for the rest.

They share one file, so each must read what the other writes exactly as it was meant:
the same rows as the same records, timestamps above all (SQLite keeps them as text).
Here the admin's side writes through ``SqlStore`` and the plain layer reads it, the
plain layer writes and ``SqlStore`` reads it, and every plain read is compared with
``SqlStore``'s own answer on the same data. The contract suite runs every other store
test on the plain layer too (``open_store`` on a SQLite file gives it)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import make_url

from parley.domain.audit import AuditEntry
from parley.domain.batches import IN_PROGRESS, QUEUED, VALIDATING, Batch, BatchLine
from parley.domain.channels import ChannelEvent, StoredChannel
from parley.domain.content import StoredContent
from parley.domain.files import StoredFile
from parley.domain.groups import Quota
from parley.domain.keys import digest, display_prefix, new_key
from parley.domain.responses import StoredResponse
from parley.domain.stored_models import StoredModel
from parley.domain.voices import Clone
from parley.store import records, schema
from parley.store.base import KeyChanges, Store, StoreUnavailable
from parley.store.opening import open_store
from parley.store.plain import shown_sqlite_file, sqlite_file, utc_from_text, utc_text
from parley.store.schema import UtcDateTime
from parley.store.sql import SqlStore, open_sql_store
from parley.store.sqlite_serving import SqliteServingStore
from tests.records import usage_record

PLUS_THREE = timezone(timedelta(hours=3))
BATCH_NUMBERS = itertools.count(1)
SERVING = (
    "migrate",
    "close",
    "list_groups",
    "keys_changed_since",
    "find_key",
    "record_usage",
    "spend_since",
    "key_spend_since",
    "prune_usage",
    "list_clones",
    "list_deletions",
    "list_channels",
    "record_channel_events",
    "prune_channel_events",
    "list_models",
    "record_audit",
    "save_contents",
    "purge_contents",
    "expired_files",
    "forget_files",
    "save_responses",
    "find_response",
    "find_turns",
    "delete_response",
    "prune_responses",
    "runnable_batches",
    "batch_line_counts_of",
    "beat_batch_lane",
    "drop_batch_lanes",
)
"""What the plain layer runs itself: the methods a serving worker calls (stored
responses too: the Responses API stores a call's response unless told not to)."""


@pytest.fixture
async def plain(tmp_path: Path) -> AsyncIterator[SqliteServingStore]:
    """The store ``open_store`` gives a SQLite file, on a file migrated beforehand (as
    a worker finds it): its own ``migrate`` only reads the revision."""
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    upgrader = await open_sql_store(url)
    await upgrader.migrate()
    await upgrader.close()
    store = await open_store(url)
    assert isinstance(store, SqliteServingStore)
    await store.migrate()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def full(plain: SqliteServingStore, tmp_path: Path) -> AsyncIterator[SqlStore]:
    """``SqlStore`` on the same file, as the admin's process (or the lazy layer) has it."""
    store = await open_sql_store(f"sqlite:///{tmp_path / 'parley.db'}")
    try:
        yield store
    finally:
        await store.close()


def protocol_members() -> list[str]:
    return [
        name
        for name in dir(Store)
        if not name.startswith("_") and inspect.iscoroutinefunction(getattr(Store, name))
    ]


def test_every_store_member_resolves_with_the_protocols_parameters() -> None:
    """Each of the Protocol's methods is a coroutine function of the plain layer's class
    that takes what the Protocol's takes (``migrate`` adds ``apart``, as ``SqlStore``)."""
    members = protocol_members()
    assert len(members) >= 90
    for name in members:
        method = getattr(SqliteServingStore, name, None)
        assert inspect.iscoroutinefunction(method), name
        wanted = inspect.signature(getattr(Store, name)).parameters
        given = dict(inspect.signature(method).parameters)
        if name == "migrate":
            given.pop("apart")
        assert list(given) == list(wanted), name
        for parameter, spec in wanted.items():
            assert given[parameter].kind == spec.kind, (name, parameter)
            assert given[parameter].default == spec.default, (name, parameter)
    assert set(SERVING) <= set(members)


async def test_the_serving_methods_never_open_the_full_store(
    plain: SqliteServingStore, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    with sqlite3.connect(tmp_path / "parley.db") as db:  # a group for a stored response
        stamp = utc_text(now)
        db.execute(
            "INSERT INTO groups (id, name, created_at, updated_at) VALUES (1, 'g', ?, ?)",
            (stamp, stamp),
        )
    await plain.list_groups()
    await plain.keys_changed_since(now)
    await plain.find_key("0" * 64)
    await plain.record_usage([usage_record("r1")])
    await plain.spend_since(now.date())
    await plain.key_spend_since(now.date())
    await plain.prune_usage(now - timedelta(days=30))
    await plain.list_clones()
    await plain.list_clones(model="tts", group_id=1)
    await plain.list_deletions(group_id=1)
    await plain.list_channels()
    await plain.record_channel_events([ChannelEvent("c", "m", "breaker", "open", "", "b", now)])
    await plain.prune_channel_events(now - timedelta(days=1))
    await plain.list_models()
    await plain.record_audit(AuditEntry(now, "alerts", "", "alert.channel", "c"))
    await plain.save_contents([content("r1", now)])
    await plain.purge_contents()
    await plain.forget_files(await plain.expired_files(100))
    await plain.save_responses([a_response("resp_1", 1, now)])
    await plain.find_response("resp_1", 1)
    await plain.find_turns("resp_1", 1, 5)
    await plain.delete_response("resp_1", 1)
    await plain.prune_responses()
    await plain.batch_line_counts_of([b.id for b in await plain.runnable_batches()])
    await plain.beat_batch_lane("lane-a", 30)
    await plain.drop_batch_lanes("lane-a", others=True)
    await plain.migrate(apart=True)
    assert plain._sql is None  # SQLAlchemy's store was never opened


# the same text on both sides


async def test_timestamps_are_the_text_sqlalchemy_writes_and_reads(
    plain: SqliteServingStore, full: SqlStore, tmp_path: Path
) -> None:
    east = datetime(2024, 1, 2, 1, 30, 5, 7, tzinfo=PLUS_THREE)
    group = await full.create_group("g")
    key = await full.create_key(group.id, name="k", digest="d" * 64, prefix="p", expires_at=east)
    with sqlite3.connect(tmp_path / "parley.db") as db:
        (written,) = db.execute("SELECT expires_at FROM api_keys").fetchone()
    assert written == "2024-01-01 22:30:05.000007" == utc_text(east)
    assert utc_from_text(written) == east and utc_from_text(written).tzinfo is UTC
    assert utc_text(datetime(2024, 1, 1, 22, 30, 5, 7)) == written  # naive: taken as UTC
    found = await plain.find_key("d" * 64)
    assert found == key and found is not None and found.expires_at == east


async def test_keys_the_admin_changes_are_seen_by_the_plain_layers_refresh(
    plain: SqliteServingStore, full: SqlStore
) -> None:
    group = await full.create_group("team", quota=Quota(rpm=5), models=frozenset({"m"}))
    secret, rotated = new_key(), new_key()
    since = datetime.now(UTC)
    key = await full.create_key(
        group.id, name="k", digest=digest(secret), prefix=display_prefix(secret)
    )
    assert await plain.keys_changed_since(since) == [key]
    assert await plain.keys_changed_since(key.created_at) == [key]  # at or after
    since = datetime.now(UTC)
    await asyncio.sleep(0.002)
    assert await plain.keys_changed_since(since) == []
    changed = await full.update_key(key.id, KeyChanges(rpm=7, models=frozenset({"m"})))
    assert await plain.keys_changed_since(since) == [changed]
    since = datetime.now(UTC)
    await full.revoke_key(key.id, datetime.now(UTC) + timedelta(hours=1))
    turned = await full.rotate_key(
        key.id,
        digest=digest(rotated),
        prefix=display_prefix(rotated),
        previous_until=datetime.now(UTC) + timedelta(minutes=5),
    )
    assert await plain.keys_changed_since(since) == [turned]
    assert await plain.keys_changed_since(datetime.now(UTC)) == []
    assert await plain.find_key(digest(secret)) == turned  # its replaced secret, in grace
    assert await plain.find_key(digest(rotated)) == turned
    assert await plain.list_groups() == await full.list_groups() == [group]


async def test_what_the_plain_layer_writes_the_full_store_reads(
    plain: SqliteServingStore, full: SqlStore
) -> None:
    now = datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=PLUS_THREE)
    events = [
        ChannelEvent("c", "m", "breaker", "open", "failed (status 502)", "breaker", now),
        ChannelEvent("c", "", "test", "ok", "", "olivia", now + timedelta(hours=1), 200, 42),
    ]
    await plain.record_channel_events(events)
    stored = await full.channel_events("c")
    assert [dataclasses.replace(e, id=None) for e in stored] == events[::-1]
    assert all(e.created_at.tzinfo is UTC for e in stored)
    entry = AuditEntry(now, "alerts", "", "alert.channel_down", "c", {"b": 1, "a": [2]})
    written = await plain.record_audit(entry)
    assert written.id is not None
    assert await full.list_audit() == [written]
    saved = content("req-1", datetime.now(UTC))
    assert await plain.save_contents([saved, saved]) == 1
    assert await plain.save_contents([saved]) == 0
    assert await full.find_content("req-1") == saved
    assert await full.save_contents([saved]) == 0  # the same row to both layers
    await full.create_group("batches")
    batch = await a_batch(full)
    await plain.beat_batch_lane("lane-a", 60)
    assert await full.take_batch(batch.id, "lane-a")
    assert not await full.take_batch(batch.id, "lane-b")  # lane-a's lease runs
    await plain.drop_batch_lanes("lane-a", others=False)
    assert await full.take_batch(batch.id, "lane-b")  # its lease is gone


async def test_every_plain_read_is_sqlstores_answer(
    plain: SqliteServingStore, full: SqlStore
) -> None:
    """The same data, read by both layers: the same records, to the microsecond."""
    now = datetime.now(UTC)
    one = await full.create_group("one", budget_nanos=9)
    two = await full.create_group("two", models=frozenset({"a", "b"}))
    await full.set_group_disabled("two", now)
    for group in (one, two):
        await full.create_key(group.id, name="k", digest=f"{group.id}" * 64, prefix="p")
    records_ = [
        usage_record("u1", created_at=datetime(2024, 1, 1, 23, 59, tzinfo=UTC), group_id=1),
        usage_record("u2", created_at=datetime(2024, 1, 2, 1, tzinfo=PLUS_THREE), key_id=2),
        usage_record("u3", created_at=datetime(2024, 1, 3, tzinfo=UTC), group_id=1),
    ]
    assert await plain.record_usage(records_) == 3
    for day in (date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 4)):
        assert await plain.spend_since(day) == await full.spend_since(day)
        assert await plain.key_spend_since(day) == await full.key_spend_since(day)
    for label, group_id, model in (("a", one.id, "m1"), ("b", two.id, "m1"), ("c", one.id, "m2")):
        await full.add_clone(a_clone(group_id, label, model))
    retired = await full.retire_clone(a_clone(one.id, "c", "m2"), now, now + timedelta(1))
    assert retired is not None
    for model, group_id in ((None, None), ("m1", None), (None, one.id), ("m1", two.id)):
        chosen = {"model": model, "group_id": group_id}
        assert await plain.list_clones(**chosen) == await full.list_clones(**chosen)
        assert await plain.list_deletions(**chosen) == await full.list_deletions(**chosen)
    await full.add_channel(StoredChannel("b", {"type": "openai"}, "sealed", "…12", now, now, now))
    await full.add_channel(StoredChannel("a", {"type": "x"}, None, None, None, now, now))
    await full.add_model(
        StoredModel("m", {"kind": "c"}, {"in": "1"}, now, None, None, True, now, now)
    )
    later = now + timedelta(days=1)
    await full.add_model(StoredModel("l", {}, {}, now, {"in": "2"}, later, False, now, now))
    assert await plain.list_channels() == await full.list_channels()
    assert await plain.list_models() == await full.list_models()
    running, other = await a_batch(full), await a_batch(full)
    await full.set_batch_status(other.id, "cancelled", only_from=(IN_PROGRESS,))
    assert (
        await plain.runnable_batches()
        == await full.runnable_batches()
        == [await full.find_batch(running.id, None)]
    )
    ids = [running.id, other.id, "batch_none"]
    assert await plain.batch_line_counts_of(ids) == await full.batch_line_counts_of(ids)
    await full.add_file(StoredFile("file-1", one.id, "f", "batch", 1, now, now))
    await full.add_file(StoredFile("file-2", one.id, "f", "batch", 1, now, later))
    assert await plain.expired_files(10) == await full.expired_files(10) == ["file-1"]
    assert await plain.forget_files(["file-1", "file-2"]) == 2


def a_response(
    response_id: str, group_id: int, now: datetime, previous: str | None = None
) -> StoredResponse:
    return StoredResponse(
        response_id,
        group_id,
        "m",
        f'{{"id": "{response_id}"}}',
        "[]",
        "[]",
        now,
        now + timedelta(days=30),
        previous,
    )


async def test_stored_responses_are_one_conversation_to_both_layers(
    plain: SqliteServingStore, full: SqlStore
) -> None:
    """Turns the plain layer stores are the full store's, and the reverse; a delete or
    a prune by either is seen by the other, a deleted turn still read as an earlier one."""
    now = datetime.now(PLUS_THREE).replace(microsecond=654321)
    one = await full.create_group("one")
    two = await full.create_group("two")
    first = a_response("resp_1", one.id, datetime.now(UTC))
    assert await plain.save_responses([first, first]) == 1  # a replayed batch adds nothing
    second = a_response("resp_2", one.id, now, previous="resp_1")
    assert await full.save_responses([second]) == 1
    third = a_response("resp_3", one.id, now, previous="resp_2")
    assert await plain.save_responses([third]) == 1
    assert await full.save_responses([third]) == 0
    for store in (plain, full):
        assert await store.find_response("resp_2", one.id) == second
        assert await store.find_response("resp_2", two.id) is None  # another group's
        assert await store.find_turns("resp_3", one.id, 10) == [third, second, first]
        assert await store.find_turns("resp_3", one.id, 2) == [third, second]
        assert await store.find_turns("resp_3", two.id, 10) == []
    assert await plain.delete_response("resp_2", one.id)  # continued: hidden, kept
    assert not await full.delete_response("resp_2", one.id)
    assert await full.find_response("resp_2", one.id) is None
    assert await full.find_turns("resp_3", one.id, 10) == [third, second, first]
    assert await plain.find_turns("resp_3", one.id, 10) == [third, second, first]
    assert await full.delete_response("resp_3", one.id)  # the newest: gone at once
    assert await plain.find_turns("resp_3", one.id, 10) == []
    assert await plain.prune_responses() == 1  # resp_2, deleted, now continued by none
    assert await full.find_turns("resp_1", one.id, 10) == [first]
    expired = a_response("resp_old", two.id, now - timedelta(days=60))
    await plain.save_responses([expired])
    assert await plain.find_response("resp_old", two.id) is None
    assert await full.prune_responses() == 1


# the shapes both layers agree on


def test_the_plain_layers_columns_and_timestamps_are_the_schemas() -> None:
    for table, names in records.COLUMNS.items():
        columns = schema.metadata.tables[table].columns
        assert names == tuple(column.name for column in columns), table
        stamps = {column.name for column in columns if isinstance(column.type, UtcDateTime)}
        assert records.TIMESTAMPS[table] == stamps, table
    assert {field.name for field in dataclasses.fields(Batch)} == set(records.COLUMNS["batches"])


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///./parley.db",
        "sqlite:////var/lib/parley/parley.db",
        "sqlite:///a%20b.db",
        "sqlite:////srv/a@b:c é.db",
        "sqlite:///parley.db?mode=ro",
        "sqlite:///parley.db?",
        "sqlite+pysqlite:///parley.db",
        "sqlite:///file:parley.db?uri=true",
        "postgresql://parley@db:5432/parley",
        "postgres://db/parley",
    ],
)
def test_a_sqlite_files_path_is_read_as_sqlalchemy_reads_it(url: str) -> None:
    parsed = make_url(url)
    expected = None
    if parsed.get_backend_name() == "sqlite" and not parsed.query:
        expected = parsed.database if parsed.database not in (None, "", ":memory:") else None
    assert sqlite_file(url) == expected
    shown = shown_sqlite_file(url)
    assert shown is None or shown == parsed.render_as_string(hide_password=True)
    assert (shown is None) == (expected is None or "?" in url)


# the plain layer's units of work


async def test_a_cancelled_plain_write_still_finishes_and_close_waits_for_one(
    plain: SqliteServingStore, tmp_path: Path
) -> None:
    event = ChannelEvent("c", "m", "breaker", "open", "", "breaker", datetime.now(UTC))
    holder = sqlite3.connect(tmp_path / "parley.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        call = asyncio.create_task(plain.record_channel_events([event]))
        await asyncio.sleep(0.2)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        in_flight = asyncio.create_task(plain.record_channel_events([event]))
        await asyncio.sleep(0.2)
        closing = asyncio.create_task(plain.close())
        await asyncio.sleep(0.2)
        assert not closing.done()  # waiting for the units the lock holds
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await closing
    await in_flight
    with pytest.raises(StoreUnavailable):
        await plain.list_channels()
    with sqlite3.connect(tmp_path / "parley.db") as db:
        assert db.execute("SELECT count(*) FROM channel_events").fetchone() == (2,)
        db.execute("BEGIN IMMEDIATE")  # nobody holds the lock: no transaction was left open


def content(request_id: str, now: datetime) -> StoredContent:
    return StoredContent(request_id, 1, "full", True, "sealed", now, now + timedelta(days=1))


def a_clone(group_id: int, label: str, model: str) -> Clone:
    return Clone(
        group_id=group_id,
        model=model,
        label=label,
        voice_id=f"g{group_id}__{label}",
        engine_name=label,
        channel="omni",
        duration_ms=10,
        created_at=datetime(2024, 1, 3, 4, 5, 6, 7, tzinfo=PLUS_THREE),
        transcript=None,
        consent="c" if label == "a" else None,
    )


async def a_batch(store: SqlStore) -> Batch:
    now = datetime.now(UTC)
    batch = Batch(
        id=f"batch_{next(BATCH_NUMBERS):024x}",
        group_id=1,
        key_id=1,
        endpoint="/v1/chat/completions",
        input_file_id="file-in",
        completion_window="24h",
        status=VALIDATING,
        created_at=now,
        expires_at=now + timedelta(days=1),
    )
    await store.add_batch(batch)
    await store.add_batch_lines([BatchLine(batch.id, n, f"c{n}", "{}", QUEUED) for n in (1, 2)])
    await store.set_batch_status(batch.id, IN_PROGRESS, only_from=(VALIDATING,), total=2)
    return batch
