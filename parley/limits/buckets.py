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
    level: float
    updated: float


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
    """The window of the bucket with the least remaining (then the longest reset).

    On every call's path, so written as one loop that builds only the ``Window`` it
    returns, rather than a list of windows and ``min`` with a key.
    """
    found: Bucket | None = None
    found_key = (0, 0.0)
    for bucket, level in zip(buckets, levels, strict=False):  # one level per bucket (decide)
        if bucket.dimension != dimension:
            continue
        key = (max(0, math.floor(level)), -seconds_until(level, bucket.limit, bucket.limit))
        if found is None or key < found_key:
            found, found_key = bucket, key
    if found is None:
        return None
    return Window(limit=found.limit, remaining=found_key[0], reset_seconds=-found_key[1])


def _positive(limit: int, scope: Scope) -> int:
    if limit <= 0:
        raise ValueError(f"scope {scope.name}: rate limits must be positive, got {limit}")
    return limit
