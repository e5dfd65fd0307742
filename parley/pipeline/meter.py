"""Stage 5: what the call consumed → cost → usage record → settled limits.

``Meter.finish`` is synchronous and cheap so it can run in a ``finally`` block, even when
the caller disconnected and the handler is being cancelled: it caps the usage at the
call's allowance (so no report or estimate bills more than the call allowed), queues the
record for the background writer, adds the cost to the budget ledger, and hands the
limiter settlement (real tokens minus the reservation) and the budget hold's release
(the real cost for the worst case held) to background tasks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from parley.domain.usage import Usage, UsageRecord
from parley.domain.value import value
from parley.errors import ParleyError, UpstreamRefused, UpstreamRejected
from parley.limits.base import Budget, Limiter, Scope, SettlesAtOnce
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.runtime.budget import SpendLedger
from parley.runtime.health import ChannelHealth
from parley.runtime.writer import UsageWriter

log = logging.getLogger("parley.meter")

MAX_DETAIL = 500
"""The most characters of a failure's reason the request log keeps."""


def failure_detail(error: BaseException | str | None) -> str | None:
    """Why a call failed, for the request log: an upstream's refusal as its status and its
    own message (redacted by the provider that read it: never a channel's key), any other
    ``ParleyError`` as what the caller was told, or ``error`` itself when it is a text.
    Cut to ``MAX_DETAIL`` characters a database can hold."""
    if isinstance(error, UpstreamRejected):
        text = f"The upstream answered {error.upstream_status}: {error.message}"
    elif isinstance(error, UpstreamRefused):
        said = f": {error.detail}" if error.detail else " (it gave no reason)"
        text = f"The upstream answered {error.upstream_status}{said}"
    elif isinstance(error, ParleyError):
        text = error.message
    elif isinstance(error, str):
        text = error
    else:
        return None
    text = text[:MAX_DETAIL].replace("\x00", "")
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


@value
class Refusal:
    """A request refused after its key was known and before it was admitted."""

    caller: Caller
    request_id: str
    endpoint: str
    status: int
    error_code: str | None
    began: float
    """``time.monotonic()`` when the request reached the gateway."""
    model: str = ""
    """The model the name resolved to, when it did."""
    model_requested: str = ""
    detail: str | None = None
    """What the caller was told (``failure_detail``)."""


class BackgroundTasks:
    """Fire-and-forget tasks that are still awaited (or cancelled) at shutdown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed", exc_info=task.exception())

    async def drain(self, seconds: float) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=seconds)


class Meter:
    def __init__(
        self, writer: UsageWriter, ledger: SpendLedger, limiter: Limiter, tasks: BackgroundTasks
    ) -> None:
        self.writer = writer
        self.ledger = ledger
        self._limiter = limiter
        self._tasks = tasks
        self._settlements: dict[tuple[Scope, ...], int] = {}
        self._settle_now = limiter.settle_now if isinstance(limiter, SettlesAtOnce) else None
        self._releases: list[tuple[Budget, str, int, int]] = []
        self.observers: list[Callable[[Call, UsageRecord], None]] = []
        """Told of every record (metrics, the access log): cheap, synchronous, no I/O."""
        self.health = ChannelHealth()
        self.refusals = 0
        """Requests refused before admission since the start (alerts watch its rate)."""

    def finish(
        self,
        call: Call,
        *,
        usage: Usage,
        status: int,
        channel: str,
        billable: bool | None = None,
        error_code: str | None = None,
        first_byte: float | None = None,
        error_detail: str | None = None,
    ) -> UsageRecord:
        """Record the call once. A failed call (status >= 400) costs nothing unless
        ``billable`` says otherwise (a stream cut after it delivered content)."""
        admission = call.admission
        usage = self.capped(call, usage, channel)
        cost = 0
        price = None
        if billable if billable is not None else status < 400:
            price = call.model.spec.price.tag
            cost = call.model.spec.price.cost(
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                characters=usage.characters,
                audio_ms=usage.audio_ms,
                cached_tokens=usage.cached_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                search_units=usage.search_units,
                image_tokens=usage.image_tokens,
                images=usage.images,
                image_grade=usage.image_grade,
                audio_tokens=usage.audio_tokens,
                cached_audio_tokens=usage.cached_audio_tokens,
                audio_output_tokens=usage.audio_output_tokens,
            )
            cost = max(0, cost)  # never a credit, whatever a price says
        record = UsageRecord(
            call.request_id,  # request_id
            datetime.now(UTC),  # created_at
            call.caller.group.id,  # group_id
            call.caller.key.id,  # key_id
            call.model.spec.name,  # model
            channel,
            call.endpoint,
            status,
            int((time.monotonic() - call.started) * 1000),  # latency_ms
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.characters,
            usage.audio_ms,
            cost,  # cost_nanos
            usage.estimated,
            usage.cached_tokens,
            usage.cache_write_tokens,
            call.model.requested,  # model_requested
            error_code,
            None if first_byte is None else int(first_byte * 1000),  # first_byte_ms
            True,  # admitted
            1,  # request_count
            usage.search_units,
            call.caller.prefix,  # key_prefix: of the secret the call came with
            error_detail,
            price,
        )
        self.writer.submit(record)
        self.health.observe(record)
        self.ledger.add(record.group_id, cost, record.key_id)
        if admission.budget is not None:
            self.release(admission.budget, call.request_id, admission.held_nanos, cost)
        if admission.key_budget is not None:
            self.release(admission.key_budget, call.request_id, admission.held_nanos, cost)
        for observe in self.observers:
            observe(call, record)
        delta = usage.total_tokens - admission.reserved_tokens
        if delta and admission.scopes:
            if self._settle_now is not None:
                self._settle_now(admission.scopes, delta)
            else:
                self._settle_soon(admission.scopes, delta)
        return record

    def capped(self, call: Call, usage: Usage, channel: str) -> Usage:
        """``usage`` within what the call allowed (``Admission.allowance``); a cut is
        logged, since it means an upstream reported (or sent) more than it may have."""
        capped = call.admission.allowance.cap(usage)
        if capped is not usage:
            log.warning(
                "capped the usage of %s on %s at what the call allowed: %s → %s",
                call.request_id,
                channel or "no channel",
                _counts(usage),
                _counts(capped),
            )
        return capped

    def release(self, budget: Budget, hold: str, held: int, cost: int) -> None:
        """End a budget hold, counting ``cost`` as spent; the releases made in one loop
        tick go to the limiter together (one Redis round trip)."""
        first = not self._releases
        self._releases.append((budget, hold, held, cost))
        if first:
            self._tasks.spawn(self._release_all())

    async def _release_all(self) -> None:
        await asyncio.sleep(0)  # let the calls finishing in this tick join the batch
        pending, self._releases = self._releases, []
        release = self._limiter.release_spend
        done = await asyncio.gather(*(release(*args) for args in pending), return_exceptions=True)
        for outcome in done:
            if isinstance(outcome, Exception):
                log.error("a budget hold was not released", exc_info=outcome)

    def refused(self, refusal: Refusal) -> None:
        """Log a request refused before admission: a small record with no usage and no
        cost, queued only while the writer has room (``UsageWriter.submit_refusal``)."""
        caller = refusal.caller
        self.refusals += 1
        record = UsageRecord(
            request_id=refusal.request_id,
            created_at=datetime.now(UTC),
            group_id=caller.group.id,
            key_id=caller.key.id,
            model=refusal.model,
            channel="",
            endpoint=refusal.endpoint,
            status=refusal.status,
            latency_ms=int((time.monotonic() - refusal.began) * 1000),
            model_requested=refusal.model_requested,
            error_code=refusal.error_code,
            admitted=False,
            key_prefix=caller.prefix,
            error_detail=refusal.detail,
        )
        self.writer.submit_refusal(record)

    def _settle_soon(self, scopes: tuple[Scope, ...], delta: int) -> None:
        """Add up corrections per scope set; one task per loop tick applies them all
        (one limiter call, one Redis round trip, per scope set, not per call)."""
        first = not self._settlements
        self._settlements[scopes] = self._settlements.get(scopes, 0) + delta
        if first:
            self._tasks.spawn(self._settle_all())

    async def _settle_all(self) -> None:
        await asyncio.sleep(0)  # let the calls finishing in this tick join the batch
        pending, self._settlements = self._settlements, {}
        for scopes, delta in pending.items():
            if delta:
                await self._limiter.settle(scopes, delta)


def _counts(usage: Usage) -> str:
    """A usage's counts for a log line."""
    return (
        f"{usage.prompt_tokens}+{usage.completion_tokens} tokens, "
        f"{usage.characters} characters, {usage.audio_ms} ms"
    )
