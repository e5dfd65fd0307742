"""The in-memory directory of groups and keys that authentication reads.

It is filled from the store at start-up and refreshed by a background task every few
seconds (keys by ``updated_at``, groups whole), so a known key never waits on the
database. A digest it does not know is looked up once in the store (a key created on
another instance a moment ago) and remembered as unknown for one refresh interval. Those
look-ups share one budget per process (``unknown_lookups_per_second``, a token bucket
holding one second's worth): a flood of distinct wrong keys, which the negative cache
cannot stop, costs the database at most that many queries a second. Past the budget an
unknown digest is refused without a look-up; a genuinely new key then works as soon as
the next refresh brings it in (``limits.cache_refresh_seconds``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from parley.domain.groups import Group
from parley.domain.keys import KeyRecord
from parley.errors import ServiceUnavailable
from parley.store.base import Store, StoreUnavailable

NEGATIVE_CACHE_SIZE = 10_000
DEFAULT_UNKNOWN_LOOKUPS_PER_SECOND = 20.0
CLOCK_SKEW = timedelta(seconds=5)


class LookupBudget:
    """A token bucket: ``per_second`` look-ups a second, at most one second's worth saved."""

    def __init__(self, per_second: float, now: float) -> None:
        self._rate = per_second
        self._capacity = max(1.0, per_second)
        self._level = self._capacity
        self._updated = now

    def take(self, now: float) -> bool:
        elapsed = max(0.0, now - self._updated)
        self._level = min(self._capacity, self._level + elapsed * self._rate)
        self._updated = now
        if self._level < 1.0:
            return False
        self._level -= 1.0
        return True


class Directory:
    def __init__(
        self,
        store: Store,
        *,
        refresh_seconds: float,
        unknown_lookups_per_second: float = DEFAULT_UNKNOWN_LOOKUPS_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._refresh_seconds = refresh_seconds
        self._clock = clock
        self._budget = LookupBudget(unknown_lookups_per_second, clock())
        self.lookups_refused = 0
        """Unknown digests refused without a look-up because the budget was spent."""
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
        """The cached record, else one store look-up unless recently found unknown or
        the look-up budget is spent."""
        record = self._keys.get(digest)
        if record is not None:
            return record
        now = self._clock()
        until = self._unknown.get(digest)
        if until is not None and until > now:
            return None
        if not self._budget.take(now):
            self.lookups_refused += 1
            return None
        try:
            record = await self._store.find_key(digest)
        except StoreUnavailable:
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
