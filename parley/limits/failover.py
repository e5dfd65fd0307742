"""Keep limiting when Redis goes away: fall back to local buckets, or refuse with 503.

``FailoverLimiter`` sends every call to the primary (Redis) limiter. When Redis cannot be
reached (a connection error, a timeout, a socket error; any other error is a bug and is
raised) it logs one error, marks itself ``degraded`` and, by policy, either:

- ``local``: answers from the fallback (in-memory) limiter, so each worker enforces the
  limits on its own for the duration of the outage (a group may then get up to one full
  quota per worker); or
- ``reject``: refuses the call with ``ServiceUnavailable`` (503).

While degraded it leaves Redis alone for ``retry_seconds``, then lets the next call try it
again; the first call that succeeds logs one info line and ends the degraded state. A call
with nothing to limit (no bucket; or a settle with no token bucket or no change) is
answered without Redis, so it proves nothing: it never ends an outage, and while degraded
it is answered like any other call (locally, or 503).

``settle`` and ``peek`` are routed the same way, to whichever limiter is current: a call
admitted by Redis but settled during an outage corrects the local buckets instead (a refund
is capped at the limit, so it gives nothing away; extra usage becomes local debt), and a call
admitted locally but settled after Redis is back corrects Redis. Under ``reject``, a settle
during an outage is dropped rather than raised: the reply it belongs to has already gone out.

Budget holds follow the same rules: ``hold_spend`` is answered by Redis while it answers,
and during an outage by each worker's local count (which starts from the spend the worker
knows: the store's totals plus its own unwritten records) or by a 503. ``release_spend``
ends a hold where it may have been taken: always in the local count (a hold taken there
during an outage ends there, even once Redis is back, so it cannot linger into the next
outage), and in Redis unless Redis is away, in which case a hold taken in Redis stays
there until it lapses (``limits.redis.HOLD_SECONDS``). The store's totals catch up
whatever cost a count missed.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, TypeVar

from parley.errors import ServiceUnavailable
from parley.limits.base import Budget, Decision, Limiter, Scope
from parley.limits.buckets import buckets_for
from parley.resp import RedisUnavailable

UNAVAILABLE_MESSAGE = "Rate limiting is unavailable; try again shortly."

_UNREACHABLE = (RedisUnavailable, OSError)
"""What "Redis is down" looks like: the client's connection errors and timeouts, and
socket errors (the built-in TimeoutError is an OSError)."""

_T = TypeVar("_T")


class FailoverLimiter:
    """The primary limiter while it answers; the fallback (or a 503) while it does not."""

    def __init__(
        self,
        primary: Limiter,
        fallback: Limiter,
        *,
        on_failure: Literal["local", "reject"] = "local",
        retry_seconds: float = 5.0,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._primary = primary
        self._fallback = fallback
        self._on_failure = on_failure
        self._retry_seconds = retry_seconds
        self._log = logger or logging.getLogger(__name__)
        self._clock = clock
        self._degraded = False
        self._retry_at = 0.0

    @property
    def degraded(self) -> bool:
        """True from a failed call to the primary until a call to it succeeds again."""
        return self._degraded

    async def acquire(self, scopes: Sequence[Scope], tokens: int) -> Decision:
        return await self._route(
            lambda limiter: limiter.acquire(scopes, tokens),
            reaches_primary=bool(buckets_for(scopes, tokens)),
        )

    async def settle(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        try:
            await self._route(
                lambda limiter: limiter.settle(scopes, delta_tokens),
                reaches_primary=delta_tokens != 0
                and any(b.dimension == "tokens" for b in buckets_for(scopes, 0)),
            )
        except ServiceUnavailable:
            self._log.debug("dropped a settle of %d tokens: Redis is unreachable", delta_tokens)

    async def peek(self, scopes: Sequence[Scope]) -> Decision:
        return await self._route(
            lambda limiter: limiter.peek(scopes), reaches_primary=bool(buckets_for(scopes, 0))
        )

    async def hold_spend(self, budget: Budget, hold: str, nanos: int) -> bool:
        return await self._route(
            lambda limiter: limiter.hold_spend(budget, hold, nanos), reaches_primary=True
        )

    async def release_spend(self, budget: Budget, hold: str, nanos: int, cost: int) -> None:
        await self._fallback.release_spend(budget, hold, nanos, cost)
        if self._degraded and self._clock() < self._retry_at:
            return  # Redis is away: its holds lapse there
        try:
            await self._primary.release_spend(budget, hold, nanos, cost)
        except _UNREACHABLE as exc:
            self._went_down(exc)
        else:
            self._came_back()

    async def close(self) -> None:
        try:
            await self._primary.close()
        except _UNREACHABLE as exc:
            self._log.debug("closing the primary limiter failed: %s", exc)
        await self._fallback.close()

    async def _route(
        self, call: Callable[[Limiter], Awaitable[_T]], *, reaches_primary: bool
    ) -> _T:
        """``reaches_primary``: the call needs the primary's backend (see the docstring)."""
        if not self._degraded or (reaches_primary and self._clock() >= self._retry_at):
            try:
                result = await call(self._primary)
            except _UNREACHABLE as exc:
                self._went_down(exc)
            else:
                if reaches_primary:
                    self._came_back()
                return result
        if self._on_failure == "reject":
            retry = str(max(1, math.ceil(self._retry_seconds)))
            raise ServiceUnavailable(UNAVAILABLE_MESSAGE, headers={"retry-after": retry})
        return await call(self._fallback)

    def _went_down(self, exc: BaseException) -> None:
        self._retry_at = self._clock() + self._retry_seconds
        if self._degraded:
            return
        self._degraded = True
        local = self._on_failure == "local"
        policy = "limiting locally in each worker" if local else "refusing calls with 503"
        self._log.error(
            "Redis is unreachable for rate limiting (%s: %s); %s until it is back, "
            "retrying every %gs",
            type(exc).__name__,
            exc,
            policy,
            self._retry_seconds,
        )

    def _came_back(self) -> None:
        if self._degraded:
            self._degraded = False
            self._log.info("Redis is reachable again; rate limits are shared again")
