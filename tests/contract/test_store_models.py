"""Stored models (managed live), the same on SQLite and PostgreSQL: added, replaced with
a price change scheduled, listed by name, deleted."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from parley.domain.stored_models import StoredModel
from parley.store.base import Conflict, Missing
from parley.store.sql import SqlStore
from tests.contract.test_store import store, store_target  # noqa: F401

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
SPEC = {"kind": "chat", "aliases": ["fast"], "channels": [{"channel": "up", "upstream": "u-1"}]}
PRICES = {"input_per_1k": "0.001", "output_per_1k": "0.002"}


def model(name: str) -> StoredModel:
    return StoredModel(name, SPEC, PRICES, NOW, None, None, True, NOW, NOW)


async def test_models_are_added_replaced_and_deleted(store: SqlStore) -> None:  # noqa: F811
    added = await store.add_model(model("b"))
    await store.add_model(model("a"))
    assert added.id is not None and added == replace(model("b"), id=added.id)
    with pytest.raises(Conflict):
        await store.add_model(model("a"))
    later, then = NOW + timedelta(minutes=1), NOW + timedelta(days=2)
    scheduled = replace(
        added,
        next_prices={"input_per_1k": "0.5"},
        next_prices_from=then,
        enabled=False,
        updated_at=later,
    )
    await store.replace_model(scheduled)
    found = await store.list_models()
    assert [m.name for m in found] == ["a", "b"]
    assert found[1] == scheduled
    assert found[1].settled(then - timedelta(microseconds=1)) == scheduled
    settled = found[1].settled(then)
    assert (settled.prices, settled.prices_from, settled.next_prices) == (
        {"input_per_1k": "0.5"},
        then,
        None,
    )
    with pytest.raises(Missing):
        await store.replace_model(replace(added, name="nobody"))
    assert await store.delete_model("a") and not await store.delete_model("a")
    assert [m.name for m in await store.list_models()] == ["b"]
