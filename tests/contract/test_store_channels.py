"""Stored channels, their history and administrator accounts, the same on SQLite and
PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from parley.domain.accounts import Account
from parley.domain.channels import ChannelEvent, StoredChannel
from parley.store.base import Conflict, Missing
from parley.store.sql import SqlStore
from tests.contract.test_store import store, store_target  # noqa: F401

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
SPEC = {"type": "openai", "base_url": "http://up.example/v1", "models": [{"name": "m"}]}


async def test_channels_are_added_replaced_and_deleted(store: SqlStore) -> None:  # noqa: F811
    added = await store.add_channel(StoredChannel("b", SPEC, "sealed", "…1234", None, NOW, NOW))
    await store.add_channel(StoredChannel("a", SPEC, None, None, None, NOW, NOW))
    assert added.id is not None and added.spec == SPEC and added.created_at == NOW
    with pytest.raises(Conflict):
        await store.add_channel(StoredChannel("a", SPEC, None, None, None, NOW, NOW))
    later = NOW + timedelta(minutes=1)
    changed = replace(added, spec={**SPEC, "weight": 3}, disabled_at=later, updated_at=later)
    await store.replace_channel(changed)
    found = await store.list_channels()
    assert [c.name for c in found] == ["a", "b"]
    assert (found[1].spec["weight"], found[1].disabled_at, found[1].updated_at) == (3, later, later)
    assert found[1].api_key_sealed == "sealed" and found[1].created_at == NOW
    with pytest.raises(Missing):
        await store.replace_channel(replace(added, name="nobody"))
    assert await store.delete_channel("a") and not await store.delete_channel("a")


async def test_a_replace_as_read_refuses_a_channel_changed_since(
    store: SqlStore,  # noqa: F811
) -> None:
    """What the health checker writes: the channel as it read it, or nothing when an
    operator changed it meanwhile."""
    added = await store.add_channel(StoredChannel("c", SPEC, None, None, None, NOW, NOW))
    later = NOW + timedelta(minutes=1)
    operators = replace(added, disabled_at=later, disabled_by="olivia", updated_at=later)
    checkers = replace(added, disabled_at=later, disabled_by="health-check", updated_at=later)
    assert (await store.replace_channel(operators, if_updated_at=NOW)).disabled_by == "olivia"
    with pytest.raises(Conflict):
        await store.replace_channel(checkers, if_updated_at=NOW)  # read before the operator
    assert [c.disabled_by for c in await store.list_channels()] == ["olivia"]
    kept = await store.replace_channel(checkers, if_updated_at=later)  # read after
    assert kept.disabled_by == "health-check"
    with pytest.raises(Missing):
        await store.replace_channel(replace(added, name="nobody"), if_updated_at=NOW)


async def test_channel_events_newest_first_and_pruned(store: SqlStore) -> None:  # noqa: F811
    events = [
        ChannelEvent("c", "m", "breaker", "open", "failed (status 502)", "breaker", NOW),
        ChannelEvent("c", "", "test", "ok", "", "olivia", NOW + timedelta(hours=1), 200, 42),
        ChannelEvent("other", "", "test", "failed", "no", "olivia", NOW, 401, 9),
    ]
    await store.record_channel_events(events)
    found = await store.channel_events("c")
    assert [(e.kind, e.state, e.status, e.latency_ms) for e in found] == [
        ("test", "ok", 200, 42),
        ("breaker", "open", None, None),
    ]
    assert found[0].created_at == NOW + timedelta(hours=1)
    assert await store.prune_channel_events(NOW + timedelta(minutes=1)) == 2
    assert [e.kind for e in await store.channel_events("c")] == ["test"]


async def test_accounts(store: SqlStore) -> None:  # noqa: F811
    await store.add_account(Account("vera", "viewer", "scrypt$x", NOW, NOW))
    with pytest.raises(Conflict):
        await store.add_account(Account("vera", "owner", "scrypt$y", NOW, NOW))
    changed = await store.update_account("vera", {"role": "operator", "disabled_at": NOW})
    assert (changed.role, changed.disabled_at, changed.password_hash) == (
        "operator",
        NOW,
        "scrypt$x",
    )
    assert [a.name for a in await store.list_accounts()] == ["vera"]
    with pytest.raises(Missing):
        await store.update_account("nobody", {"role": "owner"})
    assert await store.delete_account("vera") and await store.get_account("vera") is None


async def test_an_account_is_found_by_its_single_sign_on_identity(store: SqlStore) -> None:  # noqa: F811
    subject = "https://id.example.test user-7"
    await store.add_account(Account("ada", "owner", "", NOW, NOW, sso_subject=subject))
    found = await store.account_of_subject(subject)
    assert found is not None and (found.name, found.sso_only) == ("ada", True)
    assert await store.account_of_subject("https://id.example.test user-8") is None
    with pytest.raises(Conflict):  # one identity, one account
        await store.add_account(Account("ada2", "viewer", "", NOW, NOW, sso_subject=subject))
    await store.add_account(Account("bo", "viewer", "", NOW, NOW))
    bound = await store.update_account("bo", {"sso_subject": "https://id.example.test user-9"})
    assert bound.sso_subject == "https://id.example.test user-9"
