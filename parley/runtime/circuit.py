"""One circuit breaker: its state, its recent outcomes and what it tells of them.

A ``Breaker`` is the state of one channel's or one channel x model's breaker and a ring
of its last ``window`` outcomes; a ``Transition`` is a change of its state, told to the
listeners (the log, the metrics, the shared store); a ``BreakerView`` is what the admin
surface shows of it. When a breaker opens, closes or lets a probe through is decided by
``Breakers`` (``runtime/breaker.py``), which holds them all; this module holds what one
breaker is, apart from those rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from parley.settings import BreakerOptions


class State(IntEnum):
    """A breaker's state; the value is the ``parley_channel_state`` gauge's."""

    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


@dataclass(frozen=True, slots=True)
class Transition:
    """A breaker that changed state: ``key`` is ``channel`` or ``channel:model``."""

    key: str
    channel: str
    model: str
    state: State
    until: float
    """Wall-clock end of the cool-down (0 unless open)."""
    error: str
    remote: bool = False
    """Applied from another instance (not to be shared again)."""


@dataclass(frozen=True, slots=True)
class BreakerView:
    """One breaker as the admin surface shows it."""

    key: str
    model: str
    state: State
    calls: int
    errors: int
    error_rate: float
    failures_in_a_row: int
    last_error: str
    last_failure_at: float | None
    next_probe_at: float | None


class Breaker:
    """One breaker's state and its recent outcomes (a ring of ``window`` booleans)."""

    __slots__ = (
        "_count",
        "_errors",
        "_index",
        "_outcomes",
        "asked",
        "channel",
        "consecutive",
        "key",
        "last_error",
        "last_failure_at",
        "lease_until",
        "model",
        "options",
        "probe_lease",
        "probe_until",
        "state",
        "until",
    )

    def __init__(
        self, key: str, channel: str, model: str, options: BreakerOptions, probe_lease: float
    ) -> None:
        self.key, self.channel, self.model = key, channel, model
        self.options = options
        self.probe_lease = probe_lease
        self.state = State.CLOSED
        self.until = 0.0
        self.probe_until = 0.0
        self.lease_until = 0.0
        """Wall-clock end of the probe lease this process holds (``Breakers.grant``)."""
        self.asked = 0.0
        """When a call here last found it due a probe it had no lease for."""
        self.consecutive = 0
        self.last_error = ""
        self.last_failure_at = 0.0
        self._outcomes = bytearray(options.window)
        self._index = 0
        self._count = 0
        self._errors = 0

    def record(self, failed: bool) -> None:
        at, window = self._index, len(self._outcomes)
        if self._count == window:
            self._errors -= self._outcomes[at]
        else:
            self._count += 1
        self._outcomes[at] = failed
        self._errors += failed
        self._index = (at + 1) % window

    def over_rate(self) -> bool:
        options = self.options
        return self._count >= options.min_calls and (
            self._errors >= options.error_rate * self._count
        )

    @property
    def troubled(self) -> bool:
        """Failures in its window, or not closed: successes then count."""
        return bool(self._errors) or self.state != State.CLOSED

    def due(self, now: float) -> bool:
        """Closed, or open past its cool-down with no probe in flight."""
        return self.state == State.CLOSED or (now >= self.until and now >= self.probe_until)

    def view(self) -> BreakerView:
        return BreakerView(
            key=self.key,
            model=self.model,
            state=self.state,
            calls=self._count,
            errors=self._errors,
            error_rate=self._errors / self._count if self._count else 0.0,
            failures_in_a_row=self.consecutive,
            last_error=self.last_error,
            last_failure_at=self.last_failure_at or None,
            next_probe_at=max(self.until, self.probe_until) if self.state else None,
        )
