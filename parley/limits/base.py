"""The Limiter Protocol and the token-bucket arithmetic every implementation shares.

Each limited scope (a group, or a key with its own override) has up to two buckets: one
for requests, one for tokens. A bucket holds at most ``limit`` units and refills at
``limit`` per minute, continuously. A call takes one request and ``tokens`` tokens from
every bucket it names, all or nothing; when any bucket is short the call is refused and
nothing is taken. ``settle`` later corrects the tokens by the real usage (a bucket may go
below zero: the debt delays the next call). "Reset" is the time until a bucket is full
again, which is what OpenAI's ``x-ratelimit-reset-*`` headers report.

Budgets are held the same way: ``hold_spend`` takes a call's worst-case cost from a
group's budget for the period, unless what is spent and held already reaches the limit,
and ``release_spend`` gives the hold back and counts what the call really cost. Concurrent
calls therefore see each other's holds, and a budget is overshot by at most the worst
case of the last call it admitted. The spent count starts from the caller's own view
(``Budget.spent_nanos``: the store's total plus what it has not written yet), and is
never taken below it.

Implementations: ``limits.memory.MemoryLimiter`` (one process) and
``limits.redis.RedisLimiter`` (shared, atomic Lua), wrapped by
``limits.failover.FailoverLimiter`` when Redis may go away. One contract suite
(``tests/contract/test_limiter.py``) runs against each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from parley.domain.groups import Quota
from parley.domain.value import value

Dimension = Literal["requests", "tokens"]


@value
class Scope:
    """A named set of buckets, e.g. ``g:12`` for group 12 or ``k:34`` for key 34."""

    name: str
    quota: Quota


@value
class Window:
    """What the headers report for one dimension: the tightest bucket across scopes."""

    limit: int
    remaining: int
    reset_seconds: float


@value
class Decision:
    allowed: bool
    requests: Window | None = None
    tokens: Window | None = None
    limited_by: Dimension | None = None
    retry_after_seconds: float = 0.0
    too_large: bool = False
    """The call asks for more tokens than the bucket can ever hold."""
    limited_scope: str | None = None
    """The scope whose bucket refused the call (``g:12``, a group's; ``k:34``, a key's
    own rates), so the refusal names the limit that applied."""


UNLIMITED = Decision(allowed=True)


@value
class Budget:
    """A group's spend limit for one budget period, as one call's admission sees it."""

    name: str
    """The group and the period's first day: ``g:12:2026-11-01``."""
    limit_nanos: int
    spent_nanos: int
    """What the caller knows was spent this period: a floor under the shared count."""
    seconds_left: float
    """Until the period ends: how long the count is worth keeping."""


class Limiter(Protocol):
    async def acquire(self, scopes: Sequence[Scope], tokens: int) -> Decision:
        """Take one request and ``tokens`` tokens from every scope, or nothing."""

    async def settle(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        """Correct the tokens taken: positive takes more, negative gives back."""

    async def peek(self, scopes: Sequence[Scope]) -> Decision:
        """The state now, taking nothing."""

    async def hold_spend(self, budget: Budget, hold: str, nanos: int) -> bool:
        """Hold ``nanos`` of ``budget`` for the call ``hold`` (an id unique to it) unless
        what is spent and held already reaches the limit; whether the call may go."""

    async def release_spend(self, budget: Budget, hold: str, nanos: int, cost: int) -> None:
        """End the call's hold of ``nanos`` and count ``cost`` as spent. A hold this
        limiter does not have (made elsewhere, or expired) gives nothing back."""

    async def close(self) -> None: ...


@runtime_checkable
class SettlesAtOnce(Protocol):
    """A limiter whose state is in this process (``MemoryLimiter``): a correction costs
    no I/O, so the meter applies each one as its call ends rather than gathering a loop
    tick's corrections into one round trip, as it does for a shared limiter."""

    def settle_now(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        """``settle``, done before returning."""
