"""Circuit breakers: a channel that keeps failing is skipped until it has had time to heal.

There is one breaker per channel (opened by failures that are the channel's as a whole:
it cannot be reached, or refuses its own credentials) and one per channel x upstream
model (opened by 5xx, 429 and timeouts, so an upstream that fails one model keeps
serving the others). A breaker opens after ``failures`` failures in a row, or when the
share of failures over its last ``window`` calls passes ``error_rate``. While open, its
routes are skipped; once its cool-down is over, one call is let through first as a
probe, and that call's outcome closes or reopens it (one probe per process, or, while
the breakers are shared through Redis, one across every instance: the one that took the
probe's lease, ``leased``). A caller's own 4xx is never a failure. When every route of
a call is open, the one that failed least recently is tried anyway: a breaker never
refuses a call by itself.

State is kept per process in plain objects, read and changed synchronously on the hot
path (no I/O, nothing allocated once a breaker exists). Each transition is told to the
``transitions`` listeners: the log, the metrics and, when Redis is configured, the
shared store (``parley.runtime.shared_breakers``), which applies other instances'
transitions here through ``apply``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from parley.errors import UpstreamError, UpstreamRefused, UpstreamTimeout, UpstreamUnreachable
from parley.providers.base import Target
from parley.runtime.circuit import Breaker, BreakerView, State, Transition
from parley.settings import BreakerOptions, ChannelSettings

log = logging.getLogger("parley.breaker")

_CHANNEL_FAULTS = frozenset({401, 403})
"""Refusals of the channel's own credentials: the whole channel is at fault."""


Listener = Callable[[Transition], None]


class Routed(Protocol):
    """What the breakers read of a route (the pipeline's ``Route``): its channel
    (``target.channel``) and its channel x upstream model breaker (``breaker_key``)."""

    @property
    def target(self) -> Target: ...

    @property
    def breaker_key(self) -> str: ...


R = TypeVar("R", bound=Routed)


class Breakers:
    """Every channel's breakers, and the order in which a call may try its routes."""

    def __init__(
        self, channels: Iterable[ChannelSettings], clock: Callable[[], float] = time.time
    ) -> None:
        self._clock = clock
        self._breakers: dict[str, Breaker] = {}
        self._not_closed = 0
        self._failed_once = False
        self.transitions: list[Listener] = []
        self.leased = False
        """Probes are leased across instances (``shared_breakers``, while Redis is
        reachable): an open breaker lets its probe through only while this process holds
        the lease (``grant``). Otherwise each process lets its own probe through."""
        self._breakers = self._built(channels)

    def _built(self, channels: Iterable[ChannelSettings]) -> dict[str, Breaker]:
        """The breakers of ``channels``, those already here kept as they are."""
        built: dict[str, Breaker] = {}
        for channel in channels:
            if not channel.breaker.enabled:
                continue
            lease = channel.timeouts.connect + channel.timeouts.first_token
            keys = [(channel.name, "")]
            keys += [
                (model_key(channel.name, s.upstream or s.name), s.upstream or s.name)
                for s in channel.models
            ]
            for key, upstream in keys:
                if key in built:
                    continue
                kept = self._breakers.get(key)
                if kept is not None and kept.options == channel.breaker:
                    built[key] = kept
                else:
                    built[key] = Breaker(key, channel.name, upstream, channel.breaker, lease)
        return built

    def update(self, channels: Iterable[ChannelSettings]) -> None:
        """The channels changed (``ChannelBook``): breakers for new ones, none for those
        gone, and the state of the others kept."""
        built = self._built(channels)
        self._breakers = built
        self._not_closed = sum(1 for b in built.values() if b.state != State.CLOSED)

    def arrange(self, routes: Sequence[R]) -> Sequence[R]:
        """The routes a call may try now, those due a probe first; empty when every one
        is open (see ``least_recently_failed``)."""
        if not self._not_closed:
            return routes
        now = self._clock()
        probes: list[R] = []
        closed: list[R] = []
        for route in routes:
            channel = self._breakers.get(route.target.channel)
            model = self._breakers.get(route.breaker_key)
            shut = [b for b in (channel, model) if b is not None and b.state != State.CLOSED]
            if not shut:
                closed.append(route)
            elif all(self._due(breaker, now) for breaker in shut):
                for breaker in shut:
                    self._probe(breaker, now)
                probes.append(route)
        return probes + closed

    def _due(self, breaker: Breaker, now: float) -> bool:
        """Whether ``breaker`` lets a call through now: closed, or due a probe (and, when
        probes are leased, this process holds the lease)."""
        if not breaker.due(now):
            return False
        if breaker.state == State.CLOSED or not self.leased or now < breaker.lease_until:
            return True
        breaker.asked = now  # a call wants the probe: the shared store may take the lease
        return False

    def lease_wanted(self) -> list[Breaker]:
        """The open breakers past their cool-down that a call here wanted to probe, with
        no probe under way here and no lease held: those whose probe lease the shared
        store may try to take (an instance without calls for the channel never takes it)."""
        if not self._not_closed:
            return []
        now = self._clock()
        return [
            breaker
            for breaker in self._breakers.values()
            if breaker.state != State.CLOSED
            and breaker.asked >= breaker.until
            and breaker.due(now)
            and now >= breaker.lease_until
        ]

    def grant(self, key: str, until: float) -> None:
        """This process took breaker ``key``'s probe lease, until ``until`` (wall clock):
        its next call through is the probe."""
        breaker = self._breakers.get(key)
        if breaker is not None and breaker.state != State.CLOSED:
            breaker.lease_until = until
            breaker.asked = 0.0

    def find(self, key: str) -> Breaker | None:
        return self._breakers.get(key)

    def now(self) -> float:
        """The breakers' clock (wall-clock seconds)."""
        return self._clock()

    def _probe(self, breaker: Breaker, now: float) -> None:
        """Let one call through ``breaker``: half-open until that call's outcome, or
        until its lease ends (a probe whose caller left says nothing)."""
        if breaker.state == State.OPEN:
            self._move(breaker, State.HALF_OPEN, breaker.until, breaker.last_error)
        breaker.probe_until = now + breaker.probe_lease

    def least_recently_failed(self, routes: Sequence[R]) -> R:
        """The route whose breakers failed longest ago: tried when all are open."""

        def last_failure(route: Routed) -> float:
            found = (self._breakers.get(k) for k in (route.target.channel, route.breaker_key))
            return max((b.last_failure_at for b in found if b is not None), default=0.0)

        return min(routes, key=last_failure)

    def succeeded(self, route: Routed) -> None:
        """An attempt on ``route`` answered: resets both its breakers' runs of failures.

        A breaker's window starts at its first failure: until then a success changes
        nothing (and costs nothing), so the error rate is taken over the calls since."""
        if not self._failed_once:
            return
        for key in (route.target.channel, route.breaker_key):
            breaker = self._breakers.get(key)
            if breaker is None or not breaker.troubled:
                continue
            breaker.record(False)
            breaker.consecutive = 0
            if breaker.state != State.CLOSED:
                self._move(breaker, State.CLOSED, 0.0, "")

    def failed(self, route: Routed, error: UpstreamError) -> None:
        """An attempt on ``route`` failed with ``error``: counted against the channel's
        breaker or its model's (or neither, for the caller's own 4xx)."""
        key = _blamed(route, error)
        breaker = self._breakers.get(key) if key is not None else None
        if breaker is None:
            return
        now = self._clock()
        self._failed_once = True
        breaker.record(True)
        breaker.consecutive += 1
        breaker.last_error = error.message
        breaker.last_failure_at = now
        if breaker.state == State.OPEN:
            return  # a call that was under way when it opened, or tried with all shut
        options = breaker.options
        probe_failed = breaker.state == State.HALF_OPEN
        if probe_failed or breaker.consecutive >= options.failures or breaker.over_rate():
            self._move(breaker, State.OPEN, now + _cooldown(options, error), error.message)

    def apply(self, key: str, state: State, until: float, error: str) -> None:
        """Another instance's transition of breaker ``key``: an opening still cooling
        down and not already known here, or a closing."""
        breaker = self._breakers.get(key)
        if breaker is None:
            return
        if state == State.OPEN:
            if until <= self._clock() or (breaker.state != State.CLOSED and until <= breaker.until):
                return
            breaker.last_error = error
            breaker.last_failure_at = max(breaker.last_failure_at, self._clock())
        elif state != State.CLOSED or breaker.state == State.CLOSED:
            return
        self._move(breaker, state, until, error, remote=True)

    def views(self, channel: str) -> list[BreakerView]:
        """``channel``'s breakers: its own first, then its models'."""
        return [b.view() for b in self._breakers.values() if b.channel == channel]

    def states(self) -> list[tuple[str, str, State]]:
        """(channel, model, state) of every breaker, for the metrics."""
        return [(b.channel, b.model, b.state) for b in self._breakers.values()]

    def _move(
        self, breaker: Breaker, state: State, until: float, error: str, *, remote: bool = False
    ) -> None:
        before = breaker.state
        if before == State.CLOSED and state != State.CLOSED:
            self._not_closed += 1
        elif before != State.CLOSED and state == State.CLOSED:
            self._not_closed -= 1
        breaker.state, breaker.until = state, until
        breaker.probe_until = 0.0
        if state != State.HALF_OPEN:  # the probe's outcome: its lease is spent
            breaker.lease_until = 0.0
        if state == State.CLOSED:
            breaker.consecutive = 0
        change = Transition(
            breaker.key, breaker.channel, breaker.model, state, until, error, remote
        )
        _log_transition(before, change, self._clock())
        for listener in self.transitions:
            listener(change)


def model_key(channel: str, upstream_model: str) -> str:
    """The key of a channel x model breaker."""
    return f"{channel}:{upstream_model}"


def _blamed(route: Routed, error: UpstreamError) -> str | None:
    """Which breaker ``error`` counts against: the channel's, its model's, or none."""
    if isinstance(error, UpstreamRefused):
        if error.upstream_status in _CHANNEL_FAULTS:
            return route.target.channel
        return route.breaker_key if error.retryable else None
    if isinstance(error, UpstreamTimeout):
        return route.breaker_key
    if isinstance(error, UpstreamUnreachable):
        return route.target.channel
    return route.breaker_key


def _cooldown(options: BreakerOptions, error: UpstreamError) -> float:
    retry_after = error.retry_after if isinstance(error, UpstreamRefused) else None
    if retry_after is None or retry_after <= 0:
        return options.cooldown_seconds
    return min(retry_after, options.max_cooldown_seconds)


def _log_transition(before: State, change: Transition, now: float) -> None:
    where = change.key
    source = " (from another instance)" if change.remote else ""
    if change.state == State.OPEN:
        log.warning(
            "breaker %s: %s -> open for %.1fs%s: %s",
            where,
            before.name.lower(),
            max(0.0, change.until - now),
            source,
            change.error,
        )
    else:
        log.info(
            "breaker %s: %s -> %s%s", where, before.name.lower(), change.state.name.lower(), source
        )
