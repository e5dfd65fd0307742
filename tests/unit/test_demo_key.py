"""Each ``parley serve --demo`` start makes one key and revokes the keys earlier starts
made, so restarting the demo never piles up working keys nobody holds any more."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from parley.cli.context import with_store
from parley.domain.keys import digest
from parley.local.demo.run import demo_key
from parley.settings import Settings
from parley.store.base import Store


def test_each_start_leaves_one_working_demo_key(tmp_path: Path) -> None:
    settings = Settings.model_validate({"database": {"url": f"sqlite:///{tmp_path}/parley.db"}})

    first = demo_key(settings, with_store)
    second = demo_key(settings, with_store)
    third = demo_key(settings, with_store)

    async def keys(store: Store) -> list[tuple[str, bool]]:
        group = await store.get_group("demo")
        assert group is not None
        now = datetime.now(UTC)
        return [(key.digest, key.usable_at(now)) for key in await store.list_keys(group.id)]

    found = dict(with_store(settings, keys, announce=False))
    assert found == {digest(first): False, digest(second): False, digest(third): True}
