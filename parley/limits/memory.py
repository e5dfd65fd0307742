"""The one-process limiter, and the decision arithmetic every limiter shares.

A call names its buckets with ``buckets_for`` (one request bucket and one token bucket
per limited scope) and, once the levels are known, ``decide`` turns them into the
``Decision`` the headers report. ``MemoryLimiter`` keeps the levels in a dict;
``limits.redis.RedisLimiter`` keeps them in Redis and reads them with one Lua script, then
calls the same ``decide``, so both answer alike to the last digit of the arithmetic.

Memory stays bounded: a bucket that has refilled completely holds nothing a fresh bucket
would not, so at most once every ``sweep_seconds`` the limiter forgets the full ones. The
sweep walks every bucket, but only once per interval, never on each call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from parley.limits.base import (
    UNLIMITED,
    BucketState,
    Decision,
    Dimension,
    Scope,
    Window,
    refill,
    seconds_until,
)


@dataclass(frozen=True, slots=True)
class Bucket:
    """One bucket a call touches: its scope, dimension, size and what the call takes."""

    scope: str
    dimension: Dimension
    limit: int
    cost: float


def buckets_for(scopes: Sequence[Scope], tokens: int) -> list[Bucket]:
    """The buckets a call of ``tokens`` tokens takes from, each scope counted once."""
    buckets: list[Bucket] = []
    seen: set[str] = set()
    for scope in scopes:
        if scope.name in seen:
            continue
        seen.add(scope.name)
        rpm, tpm = scope.quota.rpm, scope.quota.tpm
        if rpm is not None:
            buckets.append(Bucket(scope.name, "requests", _positive(rpm, scope), 1.0))
        if tpm is not None:
            buckets.append(Bucket(scope.name, "tokens", _positive(tpm, scope), float(tokens)))
    return buckets


def fits(buckets: Sequence[Bucket], levels: Sequence[float]) -> bool:
    """Whether every bucket holds what the call takes from it."""
    return all(level >= bucket.cost for bucket, level in zip(buckets, levels, strict=True))


def decide(
    buckets: Sequence[Bucket], levels: Sequence[float], *, allowed: bool, taken: bool
) -> Decision:
    """The decision for a call, from the bucket levels before anything was taken.

    ``taken`` says whether an allowed call took its cost (``acquire``) or only looked
    (``peek``); the windows report the levels after the take.
    """
    if not buckets:
        return UNLIMITED
    after = [
        level - bucket.cost if allowed and taken else level
        for bucket, level in zip(buckets, levels, strict=True)
    ]
    requests = _tightest(buckets, after, "requests")
    tokens = _tightest(buckets, after, "tokens")
    if allowed:
        return Decision(allowed=True, requests=requests, tokens=tokens)
    if any(b.dimension == "tokens" and b.cost > b.limit for b in buckets):
        return Decision(
            allowed=False, requests=requests, tokens=tokens, limited_by="tokens", too_large=True
        )
    wait, dimension = max(
        (seconds_until(level, bucket.cost, bucket.limit), bucket.dimension)
        for bucket, level in zip(buckets, levels, strict=True)
        if level < bucket.cost
    )
    return Decision(
        allowed=False,
        requests=requests,
        tokens=tokens,
        limited_by=dimension,
        retry_after_seconds=wait,
    )


def _tightest(
    buckets: Sequence[Bucket], levels: Sequence[float], dimension: Dimension
) -> Window | None:
    windows = [
        Window(
            limit=bucket.limit,
            remaining=max(0, math.floor(level)),
            reset_seconds=seconds_until(level, bucket.limit, bucket.limit),
        )
        for bucket, level in zip(buckets, levels, strict=True)
        if bucket.dimension == dimension
    ]
    return min(windows, key=lambda w: (w.remaining, -w.reset_seconds), default=None)


def _positive(limit: int, scope: Scope) -> int:
    if limit <= 0:
        raise ValueError(f"scope {scope.name}: rate limits must be positive, got {limit}")
    return limit


class MemoryLimiter:
    """Token buckets in this process's memory; right for one worker, or per-worker limits."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, sweep_seconds: float = 60.0
    ) -> None:
        self._clock = clock
        self._sweep_seconds = sweep_seconds
        self._next_sweep = clock() + sweep_seconds
        self._buckets: dict[tuple[str, Dimension], tuple[BucketState, int]] = {}

    def __len__(self) -> int:
        """How many buckets are held in memory (full ones may not be forgotten yet)."""
        return len(self._buckets)

    async def acquire(self, scopes: Sequence[Scope], tokens: int) -> Decision:
        now = self._now()
        buckets = buckets_for(scopes, tokens)
        levels = [self._level(bucket, now) for bucket in buckets]
        allowed = fits(buckets, levels)
        if allowed:
            for bucket, level in zip(buckets, levels, strict=True):
                self._store(bucket, level - bucket.cost, now)
        return decide(buckets, levels, allowed=allowed, taken=True)

    async def settle(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        if delta_tokens == 0:
            return
        now = self._now()
        for bucket in buckets_for(scopes, 0):
            if bucket.dimension == "tokens":
                level = min(float(bucket.limit), self._level(bucket, now) - delta_tokens)
                self._store(bucket, level, now)

    async def peek(self, scopes: Sequence[Scope]) -> Decision:
        now = self._now()
        buckets = buckets_for(scopes, 0)
        levels = [self._level(bucket, now) for bucket in buckets]
        return decide(buckets, levels, allowed=fits(buckets, levels), taken=False)

    async def close(self) -> None:
        self._buckets.clear()

    def _level(self, bucket: Bucket, now: float) -> float:
        held = self._buckets.get((bucket.scope, bucket.dimension))
        if held is None:
            return float(bucket.limit)
        return refill(held[0], bucket.limit, now)

    def _store(self, bucket: Bucket, level: float, now: float) -> None:
        self._buckets[bucket.scope, bucket.dimension] = (BucketState(level, now), bucket.limit)

    def _now(self) -> float:
        now = self._clock()
        if now >= self._next_sweep:
            self._next_sweep = now + self._sweep_seconds
            self._sweep(now)
        return now

    def _sweep(self, now: float) -> None:
        full = [
            key
            for key, (state, limit) in self._buckets.items()
            if refill(state, limit, now) >= limit
        ]
        for key in full:
            del self._buckets[key]
