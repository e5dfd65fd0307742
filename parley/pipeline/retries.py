"""How many upstream attempts a call may make: per call, and across the process.

A call makes at most ``routing.max_attempts`` attempts (its first and its failovers,
fallback models included). Across the process, retries (attempts after a call's
first) may add at most ``retry_ratio`` of the calls of the last window, plus
``min_retries``: when every upstream is down, failovers stop multiplying the load
instead of tripling it. A retry after a connection that could not be made sends no
load anywhere, and is not counted against the process's budget (only the call's).
Both are counted in memory, per process, with no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from parley.settings import RoutingSettings

if TYPE_CHECKING:
    from parley.pipeline.route import Route

UNBOUNDED = 1 << 30


class RetryBudget:
    """Calls and retries over a sliding window (two halves), and whether one more retry
    fits. ``granted`` and ``refused`` count the retries it allowed and turned down."""

    __slots__ = (
        "_calls",
        "_clock",
        "_half",
        "_min",
        "_ratio",
        "_retries",
        "_since",
        "granted",
        "refused",
    )

    def __init__(
        self, settings: RoutingSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ratio = settings.retry_ratio
        self._min = settings.min_retries
        self._half = settings.retry_window_seconds / 2
        self._clock = clock
        self._since = clock()
        self._calls = [0, 0]
        self._retries = [0, 0]
        self.granted = 0
        self.refused = 0

    def _roll(self) -> None:
        """Move to the next half-window when its time came. It runs when a retry is
        asked for, so the calls of a quiet spell are counted in the half they end in."""
        now = self._clock()
        passed = now - self._since
        if passed < self._half:
            return
        if passed >= 2 * self._half:
            self._calls[:] = [0, self._calls[1]]
            self._retries[:] = [0, 0]
        else:
            self._calls[:] = [self._calls[1], 0]
            self._retries[:] = [self._retries[1], 0]
        self._since = now

    def call(self) -> None:
        """One call made (its first attempt): one addition, the window is kept lazily."""
        self._calls[1] += 1

    def may_retry(self) -> bool:
        """Take one retry if the budget has room."""
        self._roll()
        calls, retries = self._calls[0] + self._calls[1], self._retries[0] + self._retries[1]
        if retries >= self._min + self._ratio * calls:
            self.refused += 1
            return False
        self._retries[1] += 1
        self.granted += 1
        return True


class RetryPolicy:
    """How many attempts a call may make and what may stop it: shared by the calls of a
    plan (one for every call of a model without fallbacks), started per call only when
    a first attempt failed (``start``)."""

    __slots__ = ("_budget", "_max_attempts", "_on_context")

    def __init__(
        self,
        max_attempts: int = UNBOUNDED,
        budget: RetryBudget | None = None,
        on_context: Sequence[Route] = (),
    ) -> None:
        self._max_attempts = max_attempts
        self._budget = budget
        self._on_context = on_context

    def start(self) -> Tries:
        """The attempts left to a call whose first attempt failed."""
        return Tries(self._max_attempts, self._budget, self._on_context)


UNLIMITED = RetryPolicy()
"""No bound and no budget (a relay given no policy)."""


class Tries:
    """One call's attempts left, the process's budget, and the routes it moves to when
    an upstream says the prompt is too long for the model (``fallbacks_on_context``)."""

    __slots__ = ("_budget", "_left", "on_context")

    def __init__(
        self,
        max_attempts: int = UNBOUNDED,
        budget: RetryBudget | None = None,
        on_context: Sequence[Route] = (),
    ) -> None:
        self._left = max_attempts - 1
        self._budget = budget
        self.on_context = on_context

    def another(self, *, never_left: bool = False) -> bool:
        """Whether the call may make one more attempt (taking it from the budgets). After
        an attempt whose request ``never_left`` (no connection), the retry adds no load
        to any upstream and the process's budget is not asked."""
        if self._left <= 0:
            return False
        if not never_left and self._budget is not None and not self._budget.may_retry():
            return False
        self._left -= 1
        return True
