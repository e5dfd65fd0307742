"""Calls' kept content in the store, on SQLite and PostgreSQL alike: saved once (a batch
written twice adds nothing), found only until it expires, purged after, in rounds; and
a group's content policy and retention kept on the group."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from parley.domain.content import ContentLogging, StoredContent
from parley.store.base import GroupChanges
from parley.store.sql import SqlStore
from tests.contract.test_store import store, store_target  # noqa: F401


def content(request_id: str, *, expires_in: timedelta, group_id: int = 1) -> StoredContent:
    now = datetime.now(UTC)
    return StoredContent(
        request_id=request_id,
        group_id=group_id,
        policy="full",
        sealed=True,
        body="gAAAA-sealed-token",
        created_at=now,
        expires_at=now + expires_in,
    )


async def test_content_is_saved_once_found_until_it_expires_and_purged(
    store: SqlStore,  # noqa: F811
) -> None:
    kept = content("req_kept", expires_in=timedelta(days=1))
    old = [content(f"req_old_{n}", expires_in=timedelta(seconds=-n - 1)) for n in range(5)]
    assert await store.save_contents([kept, *old]) == 6
    assert await store.save_contents([kept]) == 0  # written twice: nothing twice

    found = await store.find_content("req_kept")
    assert found is not None
    assert (found.group_id, found.policy, found.sealed, found.body) == (
        1,
        "full",
        True,
        "gAAAA-sealed-token",
    )
    assert found.expires_at == kept.expires_at
    assert await store.find_content("req_old_0") is None  # expired: gone before the purge
    assert await store.find_content("req_never") is None

    assert await store.purge_contents(most=2) == 2  # one bounded round at a time
    assert await store.purge_contents(most=10) == 3
    assert await store.purge_contents() == 0
    assert await store.find_content("req_kept") is not None


async def test_a_groups_content_policy_is_kept_and_changed(store: SqlStore) -> None:  # noqa: F811
    plain = await store.create_group("plain")
    assert plain.content == ContentLogging("off", 30)
    audited = await store.create_group("audited", content=ContentLogging("full", 7))
    assert audited.content == ContentLogging("full", 7)

    changed = await store.update_group(
        "plain", GroupChanges(content_policy="redacted", content_retention_days=90)
    )
    assert changed.content == ContentLogging("redacted", 90)
    again = await store.update_group("plain", GroupChanges(rpm=5))  # other fields: kept
    assert again.content == ContentLogging("redacted", 90)
    listed = {group.name: group.content for group in await store.list_groups()}
    assert listed == {"plain": ContentLogging("redacted", 90), "audited": audited.content}
