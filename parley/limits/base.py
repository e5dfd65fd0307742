"""The Limiter Protocol and the token-bucket arithmetic every implementation shares.

Each limited scope (a group, or a key with its own override) has up to two buckets: one
for requests, one for tokens. A bucket holds at most ``limit`` units and refills at
``limit`` per minute, continuously. A call takes one request and ``tokens`` tokens from
every bucket it names, all or nothing; when any bucket is short the call is refused and
nothing is taken. ``settle`` later corrects the tokens by the real usage (a bucket may go
below zero: the debt delays the next call). "Reset" is the time until a bucket is full
again, which is what OpenAI's ``x-ratelimit-reset-*`` headers report.

Implementations: ``limits.memory.MemoryLimiter`` (one process) and
``limits.redis.RedisLimiter`` (shared, atomic Lua), wrapped by
``limits.failover.FailoverLimiter`` when Redis may go away. One contract suite
(``tests/contract/test_limiter.py``) runs against each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

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


UNLIMITED = Decision(allowed=True)


class Limiter(Protocol):
    async def acquire(self, scopes: Sequence[Scope], tokens: int) -> Decision:
        """Take one request and ``tokens`` tokens from every scope, or nothing."""

    async def settle(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        """Correct the tokens taken: positive takes more, negative gives back."""

    async def peek(self, scopes: Sequence[Scope]) -> Decision:
        """The state now, taking nothing."""

    async def close(self) -> None: ...
