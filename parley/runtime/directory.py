"""The in-memory directory of groups and keys that authentication reads.

It is filled from the store at start-up and refreshed by a background task every few
seconds (keys by ``updated_at``, groups whole), so a known key never waits on the
database. A digest it does not know is looked up once in the store (a key created on
another instance a moment ago) and remembered as unknown for one refresh interval. The
look-up is shared: every call that arrives with the same digest while it runs waits for
that one look-up (a burst with a brand-new key is one query, not one per call). Look-ups
share one budget per process (``unknown_lookups_per_second``, a token bucket holding one
second's worth), spent once per distinct digest looked up: a flood of distinct wrong
keys, which the negative cache cannot stop, costs the database at most that many queries
a second. Past the budget an unknown digest is refused without a look-up; a genuinely
new key then works as soon as the next refresh brings it in
(``limits.cache_refresh_seconds``).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

from parley.domain.groups import Group
from parley.domain.keys import KeyRecord
from parley.errors import ServiceUnavailable
from parley.store.base import KeyStore, StoreUnavailable

NEGATIVE_CACHE_SIZE = 10_000
DEFAULT_UNKNOWN_LOOKUPS_PER_SECOND = 20.0
CLOCK_SKEW = timedelta(seconds=5)
UNAVAILABLE = "The key cannot be verified right now; try again shortly."


class _Unavailable:
    """What a shared look-up gives back when the store could not answer: each waiting
    call raises an error of its own."""


Found: TypeAlias = KeyRecord | _Unavailable | None


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
        store: KeyStore,
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
        """Each key by the digest of its secret, and of the secret its last rotation
        replaced while that one is kept (``KeyRecord.previous_digest``)."""
        self._digests: dict[int, tuple[str, ...]] = {}
        """The digests each key id is filed under in ``_keys``."""
        self._groups: dict[int, Group] = {}
        self._unknown: OrderedDict[str, float] = OrderedDict()
        self._looking: dict[str, asyncio.Task[Found]] = {}
        """The store look-ups running, by digest: later calls with the digest wait for them."""
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
                self._file(record)
        self._pinned = {name: change for name, change in self._pinned.items() if change > seen}
        self._since = started - CLOCK_SKEW
        self.loaded_at = time.time()

    def remember_key(self, record: KeyRecord) -> None:
        """A key this instance just created, changed or revoked: effective at once."""
        self._changes += 1
        self._pinned[record.digest] = self._changes
        self._file(record)

    def _file(self, record: KeyRecord) -> None:
        """File the record under its digests, and under no digest it no longer has (a
        secret two rotations back is forgotten)."""
        digests: tuple[str, ...] = (record.digest,)
        if record.previous_digest is not None:
            digests += (record.previous_digest,)
        for stale in self._digests.get(record.id, ()):
            if stale not in digests:
                self._keys.pop(stale, None)
        self._digests[record.id] = digests
        for value in digests:
            self._keys[value] = record
            self._unknown.pop(value, None)

    def remember_group(self, group: Group) -> None:
        """A group this instance just created or changed: effective at once."""
        self._changes += 1
        self._pinned[group.id] = self._changes
        self._groups[group.id] = group

    def group(self, group_id: int) -> Group | None:
        return self._groups.get(group_id)

    def groups(self) -> list[Group]:
        return list(self._groups.values())

    def key(self, key_id: int) -> KeyRecord | None:
        """The key with this id, as last loaded or told (``None``: not known here)."""
        digests = self._digests.get(key_id)
        return self._keys.get(digests[0]) if digests else None

    def cached_keys(self) -> list[KeyRecord]:
        """Every cached key once (a key in its rotation's grace is filed twice)."""
        return list({record.id: record for record in self._keys.values()}.values())

    def cached_key(self, digest: str) -> KeyRecord | None:
        return self._keys.get(digest)

    async def find_key(self, digest: str) -> KeyRecord | None:
        """The cached record, else the store's answer: one look-up per digest at a time,
        none if the digest was recently found unknown or the look-up budget is spent."""
        record = self._keys.get(digest)
        if record is not None:
            return record
        looking = self._looking.get(digest)
        if looking is None:
            now = self._clock()
            until = self._unknown.get(digest)
            if until is not None and until > now:
                return None
            if not self._budget.take(now):
                self.lookups_refused += 1
                return None
            looking = asyncio.ensure_future(self._look_up(digest))
            self._looking[digest] = looking
            looking.add_done_callback(lambda _: self._looking.pop(digest, None))
        # shielded: a caller that goes away does not cancel the look-up the others wait for
        found = await asyncio.shield(looking)
        if isinstance(found, _Unavailable):
            raise ServiceUnavailable(UNAVAILABLE)
        return found

    async def _look_up(self, digest: str) -> Found:
        try:
            record = await self._store.find_key(digest)
        except StoreUnavailable:
            return _Unavailable()
        if record is None:
            self._unknown[digest] = self._clock() + self._refresh_seconds
            self._unknown.move_to_end(digest)
            while len(self._unknown) > NEGATIVE_CACHE_SIZE:
                self._unknown.popitem(last=False)
            return None
        self.remember_key(record)
        if record.group_id not in self._groups:
            try:
                await self.load()
            except StoreUnavailable:
                return _Unavailable()
        return record
