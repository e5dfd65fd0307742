"""The token-bucket arithmetic every limiter shares.

A call names its buckets with ``buckets_for`` (one request bucket and one token bucket
per limited scope) and, once the levels are known, ``decide`` turns them into the
``Decision`` the headers report. ``MemoryLimiter`` keeps the levels in a dict;
``RedisLimiter`` keeps them in Redis and reads them with one Lua script, then calls the
same ``decide``, so both answer alike to the last digit of the arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from parley.domain.value import value
from parley.limits.base import UNLIMITED, Decision, Dimension, Scope, Window


@dataclass(slots=True)
class BucketState:
    """A bucket as a limiter holds it: its level when last used, then, and its size then
    (a group's quota can change between calls)."""

    level: float
    updated: float
    limit: int


def refill(state: BucketState, limit: int, now: float) -> float:
    """Level of a bucket at ``now`` (full when never used)."""
    elapsed = max(0.0, now - state.updated)
    return min(float(limit), state.level + elapsed * limit / 60.0)


def seconds_until(level: float, needed: float, limit: int) -> float:
    """Time for a bucket at ``level`` to reach ``needed``."""
    if level >= needed:
        return 0.0
    return (needed - level) * 60.0 / limit


@value
class Bucket:
    """One bucket a call touches: its scope, dimension, size and what the call takes."""

    scope: str
    dimension: Dimension
    limit: int
    cost: float


def buckets_for(scopes: Sequence[Scope], tokens: int) -> list[Bucket]:
    """The buckets a call of ``tokens`` tokens takes from, each scope counted once."""
    buckets: list[Bucket] = []
    names: list[str] = []  # a scope or two
    for scope in scopes:
        name = scope.name
        if name in names:
            continue
        names.append(name)
        rpm, tpm = scope.quota.rpm, scope.quota.tpm
        if rpm is not None:
            buckets.append(Bucket(name, "requests", _positive(rpm, scope), 1.0))
        if tpm is not None:
            buckets.append(Bucket(name, "tokens", _positive(tpm, scope), float(tokens)))
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
    take = allowed and taken
    requests = tokens = None
    for bucket, before in zip(buckets, levels, strict=True):
        level = before - bucket.cost if take else before
        limit = bucket.limit
        window = Window(
            limit,
            math.floor(level) if level > 0 else 0,  # whole units left, never below zero
            0.0 if level >= limit else (limit - level) * 60.0 / limit,  # until full
        )
        if bucket.dimension == "requests":
            if requests is None or _tighter(window, requests):
                requests = window
        elif tokens is None or _tighter(window, tokens):
            tokens = window
    if allowed:
        return Decision(True, requests, tokens)
    too_large = [b for b in buckets if b.dimension == "tokens" and b.cost > b.limit]
    if too_large:
        return Decision(
            allowed=False,
            requests=requests,
            tokens=tokens,
            limited_by="tokens",
            too_large=True,
            limited_scope=min(too_large, key=lambda bucket: bucket.limit).scope,
        )
    # The longest wait decides; of equal waits, a key's own bucket is named (``k:`` sorts
    # after ``g:``), since the key alone would refuse the call.
    wait, dimension, scope = max(
        (seconds_until(level, bucket.cost, bucket.limit), bucket.dimension, bucket.scope)
        for bucket, level in zip(buckets, levels, strict=True)
        if level < bucket.cost
    )
    return Decision(
        allowed=False,
        requests=requests,
        tokens=tokens,
        limited_by=dimension,
        retry_after_seconds=wait,
        limited_scope=scope,
    )


def _tighter(window: Window, than: Window) -> bool:
    """The tightest bucket of a dimension is the one with the fewest whole units left,
    then the longest reset; the first of equals stays."""
    if window.remaining != than.remaining:
        return window.remaining < than.remaining
    return window.reset_seconds > than.reset_seconds


def _positive(limit: int, scope: Scope) -> int:
    if limit <= 0:
        raise ValueError(f"scope {scope.name}: rate limits must be positive, got {limit}")
    return limit
