"""The in-memory directory of groups and keys that authentication reads.

It is filled from the store at start-up and refreshed by a background task every few
seconds (keys by ``updated_at``, groups whole), so a known key never waits on the
database. A digest it does not know is looked up once in the store (a key created on
another instance a moment ago) and remembered as unknown for one refresh interval, so a
flood of wrong keys cannot flood the database.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError

from parley.domain.groups import Group
from parley.domain.keys import KeyRecord
from parley.errors import ServiceUnavailable
from parley.store.base import Store, StoreError

NEGATIVE_CACHE_SIZE = 10_000
CLOCK_SKEW = timedelta(seconds=5)


class Directory:
    def __init__(
        self,
        store: Store,
        *,
        refresh_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._refresh_seconds = refresh_seconds
        self._clock = clock
        self._keys: dict[str, KeyRecord] = {}
        self._groups: dict[int, Group] = {}
        self._unknown: OrderedDict[str, float] = OrderedDict()
        self._since = datetime.fromtimestamp(0, UTC)
        self._changes = 0
        self._pinned: dict[str | int, int] = {}
        """Entries told to this directory directly, with the change number that set them."""
        self.loaded_at: float | None = None
        """When the last load from the store finished (Unix time), for metrics."""

    async def load(self) -> None:
        """Read every group and every key changed since the last load.

        What this instance was told while the load ran (a group created, a key revoked
        through the admin API) is newer than what the load read, so it is kept.
        """
        started, seen = datetime.now(UTC), self._changes
        groups = await self._store.list_groups()
        changed = await self._store.keys_changed_since(self._since)
        fresh = {group.id: group for group in groups}
        for group_id, group in self._groups.items():
            if self._pinned.get(group_id, -1) > seen:
                fresh[group_id] = group
        self._groups = fresh
        for record in changed:
            if self._pinned.get(record.digest, -1) <= seen:
                self._keys[record.digest] = record
                self._unknown.pop(record.digest, None)
        self._pinned = {name: change for name, change in self._pinned.items() if change > seen}
        self._since = started - CLOCK_SKEW
        self.loaded_at = time.time()

    def remember_key(self, record: KeyRecord) -> None:
        """A key this instance just created, changed or revoked: effective at once."""
        self._changes += 1
        self._pinned[record.digest] = self._changes
        self._keys[record.digest] = record
        self._unknown.pop(record.digest, None)

    def remember_group(self, group: Group) -> None:
        """A group this instance just created or changed: effective at once."""
        self._changes += 1
        self._pinned[group.id] = self._changes
        self._groups[group.id] = group

    def group(self, group_id: int) -> Group | None:
        return self._groups.get(group_id)

    def groups(self) -> list[Group]:
        return list(self._groups.values())

    def cached_key(self, digest: str) -> KeyRecord | None:
        return self._keys.get(digest)

    async def find_key(self, digest: str) -> KeyRecord | None:
        """The cached record, else one store look-up unless recently found unknown."""
        record = self._keys.get(digest)
        if record is not None:
            return record
        now = self._clock()
        until = self._unknown.get(digest)
        if until is not None and until > now:
            return None
        try:
            record = await self._store.find_key(digest)
        except (SQLAlchemyError, StoreError, OSError):
            raise ServiceUnavailable(
                "The key cannot be verified right now; try again shortly."
            ) from None
        if record is None:
            self._unknown[digest] = now + self._refresh_seconds
            self._unknown.move_to_end(digest)
            while len(self._unknown) > NEGATIVE_CACHE_SIZE:
                self._unknown.popitem(last=False)
            return None
        self.remember_key(record)
        if record.group_id not in self._groups:
            await self.load()
        return record
