"""The store's admin methods, the same on SQLite and PostgreSQL: disabling groups, usage
across groups, errors per UTC day, keys' last use, the audit log."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from parley.domain.audit import AuditEntry
from parley.domain.requests import StatusCounts
from parley.domain.usage import GroupDailyUsage
from parley.store.base import Missing
from parley.store.sql import SqlStore
from tests.contract.test_store import digest_of, store, store_target  # noqa: F401
from tests.records import usage_record

PLUS_FIVE = timezone(timedelta(hours=5))


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2024, 3, day, hour, tzinfo=UTC)


async def test_disable_and_enable_a_group(store: SqlStore) -> None:  # noqa: F811
    await store.create_group("team")
    disabled = await store.set_group_disabled("team", at(1))
    assert disabled.disabled_at == at(1)
    assert (await store.get_group("team")).disabled_at == at(1)  # type: ignore[union-attr]
    enabled = await store.set_group_disabled("team", None)
    assert enabled.disabled_at is None
    with pytest.raises(Missing):
        await store.set_group_disabled("nobody", at(1))


async def test_usage_rollups_across_groups_with_filters(store: SqlStore) -> None:  # noqa: F811
    a, b = await store.create_group("a"), await store.create_group("b")
    await store.record_usage(
        [
            usage_record("1", created_at=at(1), group_id=a.id, model="m1", cost=10),
            usage_record("2", created_at=at(1), group_id=b.id, model="m1", cost=20),
            usage_record("3", created_at=at(2), group_id=a.id, model="m2", cost=30),
            usage_record("4", created_at=at(3), group_id=a.id, model="m1", cost=40),
        ]
    )
    rows = await store.usage_rollups(date(2024, 3, 1), date(2024, 3, 3))
    assert [(r.day.day, r.group_id, r.model, r.cost_nanos) for r in rows] == [
        (1, a.id, "m1", 10),
        (1, b.id, "m1", 20),
        (2, a.id, "m2", 30),
    ]
    only_a = await store.usage_rollups(date(2024, 3, 1), date(2024, 4, 1), group_id=a.id)
    assert [r.cost_nanos for r in only_a] == [10, 30, 40]
    m1 = await store.usage_rollups(date(2024, 3, 1), date(2024, 4, 1), model="m1")
    assert all(isinstance(r, GroupDailyUsage) and r.model == "m1" for r in m1) and len(m1) == 3


async def test_failures_by_utc_day_and_kind(store: SqlStore) -> None:  # noqa: F811
    late = datetime(2024, 3, 1, 23, 30, tzinfo=PLUS_FIVE)  # 18:30 UTC on the 1st
    records = [
        replace(usage_record("ok", created_at=at(1)), status=200),
        replace(usage_record("e1", created_at=late), status=502),
        replace(usage_record("e2", created_at=at(2, 0)), status=504),
        replace(usage_record("e3", created_at=at(2, 23)), status=503),
        replace(usage_record("mine", created_at=at(2)), status=400),
        replace(usage_record("gone", created_at=at(2)), status=499),
        replace(usage_record("busy", created_at=at(1)), status=429, admitted=False),
        replace(usage_record("nope", created_at=at(1)), status=404, admitted=False),
        replace(usage_record("old", created_at=at(1) - timedelta(days=3)), status=500),
    ]
    await store.record_usage(records)
    assert await store.failures_by_day(at(1, 0)) == {
        date(2024, 3, 1): StatusCounts(client_errors=1, rate_limited=1, server_errors=1),
        date(2024, 3, 2): StatusCounts(client_errors=2, server_errors=2),
    }


async def test_keys_last_used(store: SqlStore) -> None:  # noqa: F811
    group = await store.create_group("team")
    other = await store.create_group("other")
    used = await store.create_key(group.id, name="", digest=digest_of("a"), prefix="pk-a")
    idle = await store.create_key(group.id, name="", digest=digest_of("b"), prefix="pk-b")
    theirs = await store.create_key(other.id, name="", digest=digest_of("c"), prefix="pk-c")
    await store.record_usage(
        [
            usage_record("1", created_at=at(1), group_id=group.id, key_id=used.id),
            usage_record("2", created_at=at(4), group_id=group.id, key_id=used.id),
            usage_record("3", created_at=at(2), group_id=other.id, key_id=theirs.id),
        ]
    )
    late = [usage_record("5", created_at=at(3), group_id=group.id, key_id=used.id)]
    await store.record_usage(late)  # an older record written later never moves it back
    everyone = await store.keys_last_used()
    assert everyone == {used.id: at(4), theirs.id: at(2)}
    assert idle.id not in everyone
    assert await store.keys_last_used(group.id) == {used.id: at(4)}


async def test_audit_log_appends_and_pages_newest_first(store: SqlStore) -> None:  # noqa: F811
    written = []
    for n in range(5):
        entry = AuditEntry(
            created_at=at(1, n),
            actor="token",
            address="127.0.0.1",
            action="group.create",
            target=f"g{n}",
            detail={"rpm": n, "models": ["m"]},
        )
        written.append(await store.record_audit(entry))
    assert [e.id for e in written] == sorted(e.id for e in written)  # type: ignore[type-var]
    newest = await store.list_audit(limit=2)
    assert [e.target for e in newest] == ["g4", "g3"]
    assert newest[0].detail == {"rpm": 4, "models": ["m"]} and newest[0].created_at == at(1, 4)
    older = await store.list_audit(limit=10, before_id=newest[-1].id)
    assert [e.target for e in older] == ["g2", "g1", "g0"]
