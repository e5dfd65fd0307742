"""A group-admin's account keeps its group (``admin_accounts.group_id``, migration 0022),
the same on SQLite and PostgreSQL; a group that does not exist cannot be given."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from parley.domain.accounts import Account
from parley.store.base import StoreFault
from parley.store.sql import SqlStore
from tests.contract.test_store import store, store_target  # noqa: F401

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)


async def test_a_group_admin_keeps_its_group(store: SqlStore) -> None:  # noqa: F811
    acme = await store.create_group("acme")
    other = await store.create_group("other")
    made = await store.add_account(
        Account("gina", "group-admin", "scrypt$x", NOW, NOW, group_id=acme.id)
    )
    assert made.group_id == acme.id
    found = await store.get_account("gina")
    assert found is not None and (found.role, found.group_id) == ("group-admin", acme.id)
    moved = await store.update_account("gina", {"group_id": other.id})
    assert moved.group_id == other.id
    cleared = await store.update_account("gina", {"role": "viewer", "group_id": None})
    assert (cleared.role, cleared.group_id) == ("viewer", None)
    await store.add_account(Account("olivia", "owner", "scrypt$y", NOW, NOW))
    assert {a.name: a.group_id for a in await store.list_accounts()} == {
        "gina": None,
        "olivia": None,
    }


async def test_a_missing_group_cannot_be_given(store: SqlStore) -> None:  # noqa: F811
    with pytest.raises(StoreFault):  # the foreign key
        await store.add_account(
            Account("nog", "group-admin", "scrypt$x", NOW, NOW, group_id=987_654)
        )
    assert await store.get_account("nog") is None
