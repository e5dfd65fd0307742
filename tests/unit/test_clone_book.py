"""The clone book: memory first, the store once for an unknown id of the caller's group."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from parley.domain.voices import Clone
from parley.store.base import Conflict
from parley.store.sql import SqlStore, open_store
from parley.voices.book import CloneBook


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
    await opened.migrate()
    yield opened
    await opened.close()


NOW = datetime.now(UTC)


def clone(group_id: int, label: str) -> Clone:
    voice_id = f"g{group_id}__{label}"
    return Clone(
        group_id, "tts", label, voice_id, voice_id.lower(), "omni", 4000, datetime.now(UTC)
    )


async def test_ids_are_matched_ignoring_case_and_only_for_their_group(store: SqlStore) -> None:
    group = await store.create_group("a")
    book = CloneBook(store)
    anna = await book.add(clone(group.id, "Anna"))
    assert book.get("tts", f"g{group.id}__ANNA") == anna
    assert await book.find("tts", f"g{group.id}__anna", group.id) == anna
    assert await book.find("tts", f"g{group.id}__anna", group.id + 1) is None
    wide = f"\uff27{group.id}\uff3f\uff3f\uff21\uff2e\uff2e\uff21"  # fullwidth G, _ and ANNA
    assert await book.find("tts", wide, group.id) == anna
    assert await book.find("tts", wide, group.id + 1) is None
    with pytest.raises(Conflict):
        await book.add(clone(group.id, "Anna"))


async def test_a_clone_made_elsewhere_is_found_in_the_store(store: SqlStore) -> None:
    group = await store.create_group("a")
    book, other = CloneBook(store), CloneBook(store)
    await book.load()
    assert await book.find("tts", f"g{group.id}__bob", group.id) is None
    await other.add(clone(group.id, "bob"))
    assert await book.find("tts", f"g{group.id}__bob", group.id) is None, "unknown until refresh"
    await book.load()
    found = await book.find("tts", f"g{group.id}__bob", group.id)
    assert found is not None and found.label == "bob"


async def test_a_retirement_is_effective_at_once_and_survives_a_load(store: SqlStore) -> None:
    group = await store.create_group("a")
    book = CloneBook(store)
    anna = await book.add(clone(group.id, "anna"))
    pending = await book.retire(anna, NOW, NOW)
    assert pending is not None and pending.engine_name == anna.engine_name
    assert await book.find("tts", anna.voice_id, group.id) is None
    await book.load()
    assert book.of_group("tts", group.id) == []
    assert await store.list_clones() == []
    assert await book.retire(anna, NOW, NOW) is None, "already retired"


async def test_a_retired_id_is_pending_in_every_spelling_until_done(store: SqlStore) -> None:
    group = await store.create_group("a")
    book = CloneBook(store)
    pending = await book.retire(await book.add(clone(group.id, "Anna")), NOW, NOW)
    assert pending is not None
    for spelling in (f"g{group.id}__Anna", f"G{group.id}__ANNA", f"g{group.id}__anna"):
        assert await book.deletion_pending("tts", spelling, group.id)
    assert not await book.deletion_pending("tts", f"g{group.id}__Anna", group.id + 1)
    assert not await book.deletion_pending("other", f"g{group.id}__Anna", group.id)
    await store.finish_deletion(pending.id)
    assert not await book.deletion_pending("tts", f"g{group.id}__Anna", group.id)


async def test_the_engines_names_of_clones_are_known_for_any_group(store: SqlStore) -> None:
    group = await store.create_group("b")
    book = CloneBook(store)
    hosted = Clone(group.id, "tts", "Cy", f"g{group.id}__Cy", "Xy7Ab", "eleven", 4000, NOW)
    assert not book.is_engine_name("tts", "Xy7Ab")
    await book.add(hosted)
    assert book.is_engine_name("tts", "Xy7Ab") and not book.is_engine_name("other", "Xy7Ab")
    await book.retire(hosted, NOW, NOW)
    assert not book.is_engine_name("tts", "Xy7Ab")
    await store.add_clone(hosted)  # made on another instance
    await book.load()
    assert book.is_engine_name("tts", "Xy7Ab")
