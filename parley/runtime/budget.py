"""Spend per group and per key in the current budget period, kept in memory for admission.

What the store has (summed from the daily rollups, refreshed in the background with the
directory) plus what this instance has metered but not yet written. It is the floor of
the count admission holds calls against (``budget``, and ``Limiter.hold_spend``): that
count adds the calls in flight, and with Redis every instance's, so concurrent calls see
each other before the store does.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Literal

from parley.domain.groups import Group
from parley.domain.keys import KeyRecord
from parley.domain.usage import UsageRecord
from parley.limits.base import Budget
from parley.store.base import UsageStore

Period = Literal["month", "day"]


def period_start(period: Period, now: datetime) -> date:
    today = now.astimezone(UTC).date()
    return today.replace(day=1) if period == "month" else today


def next_period_start(period: Period, now: datetime) -> date:
    start = period_start(period, now)
    if period == "day":
        return date.fromordinal(start.toordinal() + 1)
    return date(start.year + start.month // 12, start.month % 12 + 1, 1)


class SpendLedger:
    def __init__(self, store: UsageStore, period: Period) -> None:
        self._store = store
        self.period: Period = period
        self._start = period_start(period, datetime.now(UTC))
        self._committed: dict[int, int] = {}
        self._pending: dict[int, int] = {}
        self._key_committed: dict[int, int] = {}
        self._key_pending: dict[int, int] = {}
        self._writes = 0

    def budget(self, group: Group) -> Budget | None:
        """The group's budget for admission (``None`` when it has no limit)."""
        if group.budget_nanos is None:
            return None
        return Budget(
            name=f"g:{group.id}:{self._start.isoformat()}",
            limit_nanos=group.budget_nanos,
            spent_nanos=self.spent(group.id),
            seconds_left=self.seconds_to_reset(datetime.now(UTC)),
        )

    def key_budget(self, key: KeyRecord) -> Budget | None:
        """The key's own budget for admission (``None`` when it has none)."""
        if key.budget_nanos is None:
            return None
        return Budget(
            name=f"k:{key.id}:{self._start.isoformat()}",
            limit_nanos=key.budget_nanos,
            spent_nanos=self.key_spent(key.id),
            seconds_left=self.seconds_to_reset(datetime.now(UTC)),
        )

    def seconds_to_reset(self, now: datetime) -> float:
        """How long until the current period ends (midnight UTC of its next first day)."""
        end = next_period_start(self.period, now)
        return (datetime(end.year, end.month, end.day, tzinfo=UTC) - now).total_seconds()

    def spent(self, group_id: int) -> int:
        return self._committed.get(group_id, 0) + self._pending.get(group_id, 0)

    def key_spent(self, key_id: int) -> int:
        return self._key_committed.get(key_id, 0) + self._key_pending.get(key_id, 0)

    def add(self, group_id: int, nanos: int, key_id: int | None = None) -> None:
        """A call was metered and its record queued for writing."""
        if nanos:
            self._pending[group_id] = self._pending.get(group_id, 0) + nanos
            if key_id is not None:
                self._key_pending[key_id] = self._key_pending.get(key_id, 0) + nanos

    def written(self, records: Iterable[UsageRecord]) -> None:
        """Records reached the store: move their cost from pending to committed.

        Summed per group and key first, then moved once each: a batch is hundreds of
        records of a few groups, and this runs on the event loop."""
        self._writes += 1
        start = self._start
        groups: dict[int, int] = {}
        keys: dict[int, int] = {}
        group_period: dict[int, int] = {}
        key_period: dict[int, int] = {}
        for record in records:
            cost = record.cost_nanos
            if not cost:
                continue
            group, key = record.group_id, record.key_id
            groups[group] = groups.get(group, 0) + cost
            keys[key] = keys.get(key, 0) + cost
            if record.created_at.date() >= start:  # not a record of a period that ended
                group_period[group] = group_period.get(group, 0) + cost
                key_period[key] = key_period.get(key, 0) + cost
        _move(groups, self._pending, group_period, self._committed)
        _move(keys, self._key_pending, key_period, self._key_committed)

    async def refresh(self) -> None:
        """Replace committed spend with the store's totals for the current period."""
        writes = self._writes
        start = period_start(self.period, datetime.now(UTC))
        totals = await self._store.spend_since(start)
        key_totals = await self._store.key_spend_since(start)
        if writes != self._writes:
            return  # a write landed meanwhile; the next refresh will include it
        self._start = start
        self._committed = totals
        self._key_committed = key_totals


def _move(
    written: dict[int, int],
    pending: dict[int, int],
    in_period: dict[int, int],
    committed: dict[int, int],
) -> None:
    """Take what was written off what is pending (never below zero), and add what
    belongs to the current period to what is committed."""
    for owner, cost in written.items():
        pending[owner] = max(0, pending.get(owner, 0) - cost)
    for owner, cost in in_period.items():
        committed[owner] = committed.get(owner, 0) + cost
