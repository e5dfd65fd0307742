"""The store's keys as products, the same on SQLite and PostgreSQL: editing a key,
rotating its secret (the old digest still finds it), usage rolled up per key (by either
usage writer) and the audit log searched."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from parley.domain.audit import AuditEntry, AuditQuery
from parley.domain.groups import Quota
from parley.store.base import KeyChanges, Missing
from parley.store.sql import SqlStore
from tests.contract.test_store import digest_of, store, store_target  # noqa: F401
from tests.records import usage_record


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2024, 3, day, hour, tzinfo=UTC)


async def test_edit_a_key_and_clear_what_it_overrides(store: SqlStore) -> None:  # noqa: F811
    group = await store.create_group("team")
    key = await store.create_key(
        group.id, name="ci", digest=digest_of("ci"), prefix="pk-ci", models=frozenset({"a"})
    )
    assert key.models == frozenset({"a"}) and key.budget_nanos is None
    changes = KeyChanges(
        name="app", rpm=5, budget_nanos=1_000, models=frozenset({"a", "b"}), expires_at=at(9)
    )
    changed = await store.update_key(key.id, changes)
    assert changed.name == "app" and changed.quota == Quota(rpm=5)
    assert changed.budget_nanos == 1_000 and changed.models == frozenset({"a", "b"})
    assert changed.expires_at == at(9)
    cleared = await store.update_key(
        key.id, KeyChanges(clear_rpm=True, clear_budget=True, clear_models=True, clear_expiry=True)
    )
    assert cleared.name == "app" and cleared.quota == Quota()
    assert cleared.models is None and cleared.budget_nanos is None and cleared.expires_at is None
    assert (await store.find_key(digest_of("ci"))) == cleared
    with pytest.raises(Missing):
        await store.update_key(999, KeyChanges(name="x"))


async def test_a_rotated_key_is_found_by_either_digest(store: SqlStore) -> None:  # noqa: F811
    group = await store.create_group("team")
    key = await store.create_key(group.id, name="ci", digest=digest_of("one"), prefix="pk-one")
    rotated = await store.rotate_key(
        key.id, digest=digest_of("two"), prefix="pk-two", previous_until=at(2)
    )
    assert rotated.digest == digest_of("two") and rotated.prefix == "pk-two"
    assert rotated.previous_digest == digest_of("one") and rotated.previous_until == at(2)
    assert await store.find_key(digest_of("one")) == rotated
    assert await store.find_key(digest_of("two")) == rotated
    again = await store.rotate_key(
        key.id, digest=digest_of("three"), prefix="pk-three", previous_until=at(3)
    )
    assert again.previous_digest == digest_of("two")
    assert await store.find_key(digest_of("one")) is None
    assert (await store.keys_changed_since(at(1)))[0].digest == digest_of("three")
    with pytest.raises(Missing):
        await store.rotate_key(999, digest=digest_of("x"), prefix="x", previous_until=at(1))


async def test_usage_is_rolled_up_per_key(store: SqlStore) -> None:  # noqa: F811
    a, b = await store.create_group("a"), await store.create_group("b")
    refused = replace(usage_record("r5", created_at=at(2), group_id=a.id, key_id=1), admitted=False)
    await store.record_usage(
        [
            usage_record("r1", created_at=at(1), group_id=a.id, key_id=1, cost=100),
            usage_record("r2", created_at=at(1, 23), group_id=a.id, key_id=1, cost=50),
            usage_record("r3", created_at=at(2), group_id=a.id, key_id=2, model="m2", cost=7),
            usage_record("r4", created_at=at(2), group_id=b.id, key_id=3, cost=1),
            refused,
        ]
    )
    await store.record_usage([usage_record("r1", created_at=at(1), group_id=a.id, key_id=1)])
    rows = await store.key_usage_rollups(date(2024, 3, 1), date(2024, 3, 3))
    summary = [(r.day.day, r.group_id, r.key_id, r.model, r.requests, r.cost_nanos) for r in rows]
    assert summary == [
        (1, a.id, 1, "chat-large", 2, 150),
        (2, a.id, 2, "m2", 1, 7),
        (2, b.id, 3, "chat-large", 1, 1),
    ]
    only_a = await store.key_usage_rollups(date(2024, 3, 1), date(2024, 3, 3), group_id=a.id)
    assert {row.key_id for row in only_a} == {1, 2}
    by_model = await store.key_usage_rollups(date(2024, 3, 1), date(2024, 3, 3), model="m2")
    assert [row.key_id for row in by_model] == [2]
    assert await store.key_spend_since(date(2024, 3, 2)) == {2: 7, 3: 1}
    assert await store.key_spend_since(date(2024, 3, 1)) == {1: 150, 2: 7, 3: 1}


async def test_the_audit_log_is_searched_by_actor_action_target_and_time(
    store: SqlStore,  # noqa: F811
) -> None:
    base = at(1)
    for index, (actor, action, target) in enumerate(
        [
            ("token", "group.create", "Acme_Corp"),
            ("session:ab", "key.create", "key 1 (pk-aaa…)"),
            ("token", "key.rotate", "key 1 (pk-bbb…)"),
            ("token", "group.disable", "acme_corp"),
            ("token", "key.revoke", "key 2 (pk_100%…)"),
        ]
    ):
        entry = AuditEntry(base + timedelta(hours=index), actor, "127.0.0.1", action, target)
        await store.record_audit(entry)

    async def actions(**query: object) -> list[str]:
        entries = await store.list_audit(limit=10, query=AuditQuery(**query))  # type: ignore[arg-type]
        return [entry.action for entry in entries]

    assert await actions(actor="session:ab") == ["key.create"]
    assert await actions(action="key.") == ["key.revoke", "key.rotate", "key.create"]
    assert await actions(action="key") == []
    assert await actions(action="group.create") == ["group.create"]
    assert await actions(target="ACME") == ["group.disable", "group.create"]
    assert await actions(target="100%") == ["key.revoke"]
    assert await actions(target="_corp") == ["group.disable", "group.create"]
    window = {"since": base + timedelta(hours=1), "until": base + timedelta(hours=3)}
    assert await actions(**window) == ["key.rotate", "key.create"]
    assert await actions(actor="token", action="key.", **window) == ["key.rotate"]
    tokens = AuditQuery(actor="token")
    newest = await store.list_audit(limit=2, query=tokens)
    older = await store.list_audit(limit=2, before_id=newest[-1].id, query=tokens)
    assert [e.action for e in older] == ["key.rotate", "group.create"]
