"""The one-process limiter: token buckets in a dict (arithmetic in ``limits.buckets``).

Memory stays bounded: a bucket that has refilled completely holds nothing a fresh bucket
would not, so at most once every ``sweep_seconds`` the limiter forgets the full ones. The
sweep walks every bucket, but only once per interval, never on each call; it also forgets
the spend of budget periods that have ended and hold nothing.

A budget's holds live here until released: the runner releases every hold it takes
(``runner.Metered``), and a process that dies takes its holds with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from parley.limits.base import Budget, Decision, Dimension, Scope
from parley.limits.buckets import Bucket, BucketState, buckets_for, decide, fits, refill


class _Spend:
    """One budget period's spend as this process counts it: spent, and held by calls."""

    __slots__ = ("ends", "held", "holds", "spent")

    def __init__(self, spent: int, ends: float) -> None:
        self.spent = spent
        self.held = 0
        self.holds: dict[str, int] = {}
        self.ends = ends


class MemoryLimiter:
    """Token buckets in this process's memory; right for one worker, or per-worker limits."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, sweep_seconds: float = 60.0
    ) -> None:
        self._clock = clock
        self._sweep_seconds = sweep_seconds
        self._next_sweep = clock() + sweep_seconds
        self._buckets: dict[tuple[str, Dimension], BucketState] = {}
        self._spend: dict[str, _Spend] = {}

    def __len__(self) -> int:
        """How many buckets are held in memory (full ones may not be forgotten yet)."""
        return len(self._buckets)

    async def acquire(self, scopes: Sequence[Scope], tokens: int) -> Decision:
        # Every call's path: one pass refills the buckets (each bucket's state is kept and
        # taken from in place, not rebuilt), a second takes the cost if all of it fits.
        now = self._now()
        buckets = buckets_for(scopes, tokens)
        held = self._buckets
        states = []
        levels = []
        allowed = True
        for bucket in buckets:
            key = (bucket.scope, bucket.dimension)
            state = held.get(key)
            limit = bucket.limit
            if state is None:
                state = held[key] = BucketState(float(limit), now, limit)
            else:
                state.level = refill(state, limit, now)
                state.updated, state.limit = now, limit
            states.append(state)
            levels.append(state.level)
            if state.level < bucket.cost:
                allowed = False
        if allowed:
            for bucket, state in zip(buckets, states, strict=True):
                state.level -= bucket.cost
        return decide(buckets, levels, allowed=allowed, taken=True)

    async def settle(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        self.settle_now(scopes, delta_tokens)

    def settle_now(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        if delta_tokens == 0:
            return
        now = self._now()
        held = self._buckets
        settled: list[str] = []  # each scope once, as ``buckets_for`` counts them
        for scope in scopes:
            limit = scope.quota.tpm
            if limit is None or scope.name in settled:
                continue
            settled.append(scope.name)
            key: tuple[str, Dimension] = (scope.name, "tokens")
            state = held.get(key)
            if state is None:
                state = held[key] = BucketState(float(limit), now, limit)
            else:
                state.level = refill(state, limit, now)
                state.updated, state.limit = now, limit
            state.level = min(float(limit), state.level - delta_tokens)

    async def peek(self, scopes: Sequence[Scope]) -> Decision:
        now = self._now()
        buckets = buckets_for(scopes, 0)
        levels = [self._level(bucket, now) for bucket in buckets]
        return decide(buckets, levels, allowed=fits(buckets, levels), taken=False)

    async def hold_spend(self, budget: Budget, hold: str, nanos: int) -> bool:
        now = self._now()
        spend = self._spend.get(budget.name)
        if spend is None:
            spend = _Spend(budget.spent_nanos, now + budget.seconds_left)
            self._spend[budget.name] = spend
        spend.spent = max(spend.spent, budget.spent_nanos)
        if spend.spent + spend.held >= budget.limit_nanos:
            return False
        if nanos > 0:
            spend.holds[hold] = spend.holds.get(hold, 0) + nanos
            spend.held += nanos
        return True

    async def release_spend(self, budget: Budget, hold: str, nanos: int, cost: int) -> None:
        spend = self._spend.get(budget.name)
        if spend is None:
            return
        held = spend.holds.pop(hold, None)
        if held is not None:
            spend.held -= held
        spend.spent += cost

    async def close(self) -> None:
        self._buckets.clear()
        self._spend.clear()

    def _level(self, bucket: Bucket, now: float) -> float:
        """The bucket's level at ``now``, taking nothing and keeping nothing."""
        state = self._buckets.get((bucket.scope, bucket.dimension))
        if state is None:
            return float(bucket.limit)
        return refill(state, bucket.limit, now)

    def _now(self) -> float:
        now = self._clock()
        if now >= self._next_sweep:
            self._next_sweep = now + self._sweep_seconds
            self._sweep(now)
        return now

    def _sweep(self, now: float) -> None:
        full = [
            key
            for key, state in self._buckets.items()
            if refill(state, state.limit, now) >= state.limit
        ]
        for key in full:
            del self._buckets[key]
        ended = [
            name for name, spend in self._spend.items() if spend.ends <= now and not spend.holds
        ]
        for name in ended:
            del self._spend[name]
