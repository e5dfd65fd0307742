"""The batch lane's share of each channel: how many batch lines it may have in flight
there, shrinking when the channel's interactive calls suffer and growing back when they
don't.

The share starts at ``batches.per_channel`` and moves by additive increase,
multiplicative decrease, per channel:

- **Shrinks by half** (at most once every ``SHRINK_EVERY`` seconds, down to 0) when an
  interactive call on the channel is answered 429 by its upstream (an attempt fallen
  over counts too), or when the channel's interactive calls slow down: their recent
  latency (time to first byte for a stream, the whole reply's for the rest; a fast
  moving average) is more than ``batches.slowdown`` above the channel's best recent
  latency (a floor that follows the fast average down at once and up slowly), and by
  more than ``SLOWER_MS``. An upstream that queues calls shows it so.
- **Grows by one line** every ``batches.grow_seconds`` without either, up to
  ``per_channel``.

Batch lines' own calls (request ids ``batch_req_...``) are not interactive and say
nothing. Everything here is in memory, per process, fed synchronously by the meter's
observers and the runner's watchers: no I/O, nothing awaited.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from parley.domain.usage import UsageRecord
from parley.errors import UpstreamError
from parley.pipeline.call import Call
from parley.pipeline.route import Route

BATCH_REQUEST = "batch_req_"
SHRINK_EVERY = 1.0
"""The least seconds between two halvings of a channel's share (a burst of 429s is one
signal, not ten)."""
SLOWER_MS = 50.0
"""A slowdown smaller than this is noise, whatever its ratio."""
FAST = 0.3
"""The weight of each new latency in the fast moving average."""
FLOOR_RISE = 0.02
"""How far the floor moves toward a slower average with each call."""
TOO_MANY = 429


@dataclass(slots=True)
class _Channel:
    share: float
    changed_at: float
    """When the share last shrank or grew (``time.monotonic``)."""
    shrunk_at: float = -math.inf
    fast_ms: float | None = None
    floor_ms: float | None = None


class LaneShare:
    """Each channel's share of batch lines in flight (``limit``)."""

    def __init__(
        self,
        most: int,
        grow_seconds: float,
        slowdown: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._most = most
        self._grow_seconds = grow_seconds
        self._slowdown = slowdown
        self._clock = clock
        self._channels: dict[str, _Channel] = {}

    def limit(self, channel: str) -> int:
        """The most batch lines the lane may have in flight on ``channel`` now."""
        state = self._channels.get(channel)
        if state is None:
            return self._most
        now = self._clock()
        grown = int((now - state.changed_at) // self._grow_seconds)
        if grown and state.share < self._most:
            state.share = min(float(self._most), state.share + grown)
            state.changed_at += grown * self._grow_seconds
        elif state.share >= self._most:
            state.changed_at = now
        return int(state.share)

    def shares(self) -> dict[str, int]:
        """Each channel's share now (``/metrics``)."""
        return {channel: self.limit(channel) for channel in self._channels}

    def observe(self, call: Call, record: UsageRecord) -> None:
        """A metered call (``Meter.observers``): an interactive one's latency on the
        channel that answered it."""
        channel = record.channel
        if not channel or record.status >= 400 or record.request_id.startswith(BATCH_REQUEST):
            return
        first_byte = record.first_byte_ms
        self._latency(channel, float(record.latency_ms if first_byte is None else first_byte))

    def upstream_failed(self, call: Call, route: Route, error: UpstreamError, _: float) -> None:
        """A failed upstream attempt (``CallWatchers.upstream_failed``): an interactive
        call answered 429 by the route's channel (fallen over or not)."""
        too_many = getattr(error, "upstream_status", error.status) == TOO_MANY
        if too_many and not call.request_id.startswith(BATCH_REQUEST):
            self._shrink(route.target.channel)

    def _state(self, channel: str) -> _Channel:
        state = self._channels.get(channel)
        if state is None:
            state = self._channels[channel] = _Channel(float(self._most), self._clock())
        return state

    def _latency(self, channel: str, ms: float) -> None:
        state = self._state(channel)
        fast = ms if state.fast_ms is None else state.fast_ms + FAST * (ms - state.fast_ms)
        floor = fast if state.floor_ms is None else state.floor_ms
        floor = fast if fast < floor else floor + FLOOR_RISE * (fast - floor)
        state.fast_ms, state.floor_ms = fast, floor
        if fast - floor > SLOWER_MS and fast > floor * (1 + self._slowdown):
            self._shrink(channel)

    def _shrink(self, channel: str) -> None:
        state = self._state(channel)
        now = self._clock()
        if now - state.shrunk_at < SHRINK_EVERY:
            return
        self.limit(channel)  # growth owed until now first
        state.share = math.floor(state.share / 2)
        state.shrunk_at = state.changed_at = now
