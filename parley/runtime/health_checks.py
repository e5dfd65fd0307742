"""Scheduled health checks: the test button's call to every model of every channel that
asks for it, at the channel's interval, in the background.

Each channel with ``health.interval_seconds`` set is checked once per interval (its first
check at a random point of its first interval, so that channels, workers and instances
do not all call at once): one minimal real call per model (``runtime/channel_probe.py``:
a chat of at most one token), never on a caller's path. Each outcome is told to the
breakers as a call's would be (a failure counts against the channel's or the model's
breaker, a success closes a half-open or open one), so a channel whose upstream is down
has its breaker opened by the checks alone, with no caller's traffic, and is closed
again by the first check that passes.

A check costs the operator real tokens and no group anything: it is not metered; each is
kept in the channel's history (``channel_events``, kind ``check``, actor
``health-check``), beside the test button's calls.

``disable_after``: after that many checks in a row that find every model of a stored
channel failing, the checker disables it (``disabled_by = "health-check"``); it goes on
checking it, and enables it again once a check finds every model answering. A channel an
administrator disabled is never checked nor enabled by it; config-file channels are never
disabled (their breakers still open). Both changes are audited once, with actor
``health-check``.

With Redis (``SharedBreakers``) one instance checks a channel per interval: whoever takes
its lease (``SET ... NX PX interval``); without it, each worker checks on its own jittered
schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from pydantic import ValidationError

from parley.credentials import SealError
from parley.domain.audit import AuditEntry
from parley.domain.channels import ChannelEvent, StoredChannel
from parley.providers.base import Target
from parley.providers.registry import ProviderRegistry
from parley.runtime.breaker import Breakers, model_key
from parley.runtime.channel_book import ChannelBook, stored_settings
from parley.runtime.channel_probe import ProbeResult, probe, target_of
from parley.settings import ChannelModel, ChannelSettings, ModelKind
from parley.store.base import CheckStore, Conflict, Missing, StoreFault, StoreUnavailable

log = logging.getLogger("parley.health")

CHECKER = "health-check"
"""The actor of the checks' history lines and audit entries, and the ``disabled_by`` of a
channel the checks disabled."""
TICK_SECONDS = 1.0
"""The longest the scheduler sleeps: a channel added or changed is seen within it."""

Lease = Callable[[str, float], Awaitable[bool]]
"""Whether this process may check channel ``name`` for ``seconds`` (one per interval
across instances); ``True`` when no one else can be asked."""
KindOf = Callable[[str], ModelKind]


@dataclass(frozen=True, slots=True)
class CheckRoute:
    """A checked model as the breakers read a route."""

    target: Target
    breaker_key: str


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """A channel's latest check: one result per model."""

    at: float
    """Wall-clock seconds (``time.time()``) when it ended."""
    results: tuple[ProbeResult, ...]
    failed_in_a_row: int
    """Checks in a row, this one included, that found every model failing."""

    @property
    def down(self) -> bool:
        """Every model failed."""
        return bool(self.results) and not any(result.ok for result in self.results)

    @property
    def ok(self) -> bool:
        return all(result.ok for result in self.results)

    @property
    def error(self) -> str:
        """The first failure, as ``model: status message``; empty when all passed."""
        for result in self.results:
            if not result.ok:
                return f"{result.model}: {result.status} {result.message}".strip()
        return ""


class HealthChecks:
    """The checker: ``run`` is the background loop, ``last`` each channel's latest check."""

    def __init__(
        self,
        book: ChannelBook,
        breakers: Breakers,
        providers: ProviderRegistry,
        kind_of: KindOf,
        store: CheckStore,
        *,
        changed: Callable[[], Awaitable[None]],
        lease: Lease | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._book = book
        self._breakers = breakers
        self._providers = providers
        self._kind_of = kind_of
        self._store = store
        self._changed = changed
        self.lease = lease
        self._rng = rng or random.Random()
        self._next: dict[str, float] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        self.last: dict[str, CheckOutcome] = {}
        self.checked = asyncio.Condition()
        """Notified after each channel's check, its history written and acted upon."""

    def candidates(self) -> list[ChannelSettings]:
        """The channels to check: the routed ones with an interval, and the stored ones
        the checker disabled (to enable them again)."""
        found = [c for c in self._book.active if c.health.interval_seconds is not None]
        for stored in self._book.stored:
            if stored.disabled_at is None or stored.disabled_by != CHECKER:
                continue
            try:
                settings = stored_settings(stored, self._book.box)
            except (SealError, ValidationError):
                continue  # the book logs it; nothing to call with
            if settings.health.interval_seconds is not None:
                found.append(settings)
        return found

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                now = loop.time()
                channels = self.candidates()
                for channel in channels:
                    self._start_due(channel, now)
                names = {channel.name for channel in channels}
                for gone in set(self._next) - names:
                    del self._next[gone]
                known = {c.name for c in self._book.configured} | {
                    s.name for s in self._book.stored
                }
                for gone in set(self.last) - known:
                    del self.last[gone]
                wait = min((self._next[name] - now for name in names), default=TICK_SECONDS)
                await asyncio.sleep(min(TICK_SECONDS, max(0.001, wait)))
        finally:
            running = list(self._running.values())
            for task in running:
                task.cancel()
            for task in running:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _start_due(self, channel: ChannelSettings, now: float) -> None:
        name, interval = channel.name, channel.health.interval_seconds or TICK_SECONDS
        due = self._next.setdefault(name, now + self._rng.random() * interval)
        if now < due or name in self._running:
            return
        self._next[name] = now + interval
        task = asyncio.create_task(self._check(channel, interval), name=f"parley-check-{name}")
        self._running[name] = task
        task.add_done_callback(lambda _: self._running.pop(name, None))

    async def _check(self, channel: ChannelSettings, interval: float) -> None:
        if self.lease is not None and not await self.lease(channel.name, interval):
            return  # another instance checks it this interval
        results = []
        for served in channel.models:
            result = await probe(self._providers, channel, served, self._kind_of(served.name))
            self._tell_breakers(channel, served, result)
            results.append(result)
        before = self.last.get(channel.name)
        down = bool(results) and not any(result.ok for result in results)
        in_a_row = (before.failed_in_a_row if before is not None else 0) + 1 if down else 0
        outcome = CheckOutcome(time.time(), tuple(results), in_a_row)
        self.last[channel.name] = outcome
        try:
            await self._store.record_channel_events(_events(channel.name, outcome))
            await self._act(channel, outcome)
        except (StoreUnavailable, StoreFault) as error:
            log.warning("health check of %s: not recorded (%s)", channel.name, error)
        async with self.checked:
            self.checked.notify_all()

    def _tell_breakers(
        self, channel: ChannelSettings, served: ChannelModel, result: ProbeResult
    ) -> None:
        upstream = served.upstream or served.name
        route = CheckRoute(target_of(channel, served), model_key(channel.name, upstream))
        if result.ok:
            self._breakers.succeeded(route)
        elif result.error is not None:
            self._breakers.failed(route, result.error)

    async def _act(self, channel: ChannelSettings, outcome: CheckOutcome) -> None:
        """Disable a stored channel after ``disable_after`` checks in a row found it
        down; enable one the checker disabled once a check finds it answering."""
        limit = channel.health.disable_after
        disabling = limit is not None and outcome.down and outcome.failed_in_a_row >= limit
        disabled_here = any(
            s.name == channel.name and s.disabled_by == CHECKER for s in self._book.stored
        )
        if not disabling and not (outcome.ok and disabled_here):
            return  # the book says enough; the database is read only before a change
        stored = next(
            (s for s in await self._store.list_channels() if s.name == channel.name), None
        )
        if stored is None:
            return  # a config-file channel (never disabled) or one just deleted
        if disabling and stored.disabled_at is None:
            await self._switch(stored, True, outcome)
        elif outcome.ok and stored.disabled_at is not None and stored.disabled_by == CHECKER:
            await self._switch(stored, False, outcome)

    async def _switch(self, stored: StoredChannel, disable: bool, outcome: CheckOutcome) -> None:
        now = datetime.now(UTC)
        switched = replace(
            stored,
            disabled_at=now if disable else None,
            disabled_by=CHECKER if disable else None,
            updated_at=now,
        )
        try:  # only the channel as read: an operator's change meanwhile is theirs to keep
            await self._store.replace_channel(switched, if_updated_at=stored.updated_at)
        except (Conflict, Missing):
            log.info("health checks: channel %s changed meanwhile; left as it is", stored.name)
            return
        detail: dict[str, object]
        if disable:
            detail = {"failed_checks": outcome.failed_in_a_row, "error": outcome.error}
            log.warning(
                "health checks disabled channel %s after %d failed checks: %s",
                stored.name,
                outcome.failed_in_a_row,
                outcome.error,
            )
        else:
            detail = {"reason": "every model answered its check"}
            log.info("health checks enabled channel %s again", stored.name)
        action = "channel.disable" if disable else "channel.enable"
        await self._store.record_audit(AuditEntry(now, CHECKER, "", action, stored.name, detail))
        await self._changed()


def _events(channel: str, outcome: CheckOutcome) -> list[ChannelEvent]:
    at = datetime.fromtimestamp(outcome.at, UTC)
    return [
        ChannelEvent(
            channel=channel,
            model=result.model,
            kind="check",
            state="ok" if result.ok else "failed",
            message=result.message,
            actor=CHECKER,
            created_at=at,
            status=result.status,
            latency_ms=result.latency_ms,
        )
        for result in outcome.results
    ]
