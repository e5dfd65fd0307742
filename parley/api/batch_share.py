"""The batch lane's share of each channel: how many batch lines it may have in flight
there, shrinking when the channel's interactive calls suffer and growing back when they
don't.

The share of a channel starts at one line and moves by additive increase,
multiplicative decrease, within 0 and ``batches.per_channel``:

- **Shrinks by half** (at most once every ``SHRINK_EVERY`` seconds, down to 0) when an
  interactive call on the channel is answered 429 by its upstream (an attempt fallen
  over counts too), or when the channel's interactive calls slow down: their recent
  latency (time to first byte for a stream, the whole reply's for the rest; a fast
  moving average) is more than ``batches.slowdown`` above the channel's best recent
  latency (a floor that follows the fast average down at once and up over about a
  minute), and by more than ``SLOWER_MS``. An upstream that queues calls shows it so.
- **Grows by one line** every ``batches.grow_seconds`` without either, up to one line
  below the share it last shrank from (the lines the channel was last seen to bear);
  past that, one line every ``PROBE_FACTOR`` times as long, so the lane keeps probing
  for room the interactive calls left without pressing on them often.

Starting low matters: the channel's best latency is learnt while the lane takes little
of it.

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
SHRINK_EVERY = 2.0
"""The least seconds between two halvings of a channel's share (a burst of 429s is one
signal, not ten)."""
SLOWER_MS = 20.0
"""A slowdown smaller than this is noise, whatever its ratio."""
FAST = 0.3
"""The weight of each new latency in the fast moving average."""
FLOOR_SECONDS = 60.0
"""How slowly the floor follows a slower average: its time constant, in seconds (a
latency that stays higher this long is the channel's new normal)."""
TOO_MANY = 429
PROBE_FACTOR = 6
"""How much slower the share grows past the lines the channel was last seen to bear."""


@dataclass(slots=True)
class _Channel:
    share: int
    ceiling: int
    """The lines the channel was last seen to bear: growth slows past it."""
    changed_at: float
    """When the share last shrank or grew (``time.monotonic``)."""
    shrunk_at: float = -math.inf
    fast_ms: float | None = None
    floor_ms: float | None = None
    seen_at: float = 0.0
    """When the last latency was seen (``time.monotonic``)."""


class LaneShare:
    """Each channel's share of batch lines in flight (``limit``)."""

    def __init__(
        self,
        most: int,
        grow_seconds: float,
        slowdown: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        adaptive: bool = True,
    ) -> None:
        self._most = most
        self._adaptive = adaptive
        """Off: the share is ``most`` on every channel, always."""
        self._grow_seconds = grow_seconds
        self._slowdown = slowdown
        self._clock = clock
        self._channels: dict[str, _Channel] = {}

    def limit(self, channel: str) -> int:
        """The most batch lines the lane may have in flight on ``channel`` now
        (``per_channel`` for lines no channel serves: they fail at once)."""
        if not channel or not self._adaptive:
            return self._most
        state = self._state(channel)
        now = self._clock()
        while state.share < self._most:
            wait = self._grow_seconds
            if state.share >= state.ceiling:
                wait *= PROBE_FACTOR
            if now - state.changed_at < wait:
                break
            state.share += 1
            state.changed_at += wait
        if state.share >= self._most:
            state.changed_at = now
        return state.share

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
            state = self._channels[channel] = _Channel(1, self._most, self._clock())
        return state

    def _latency(self, channel: str, ms: float) -> None:
        state = self._state(channel)
        now = self._clock()
        fast = ms if state.fast_ms is None else state.fast_ms + FAST * (ms - state.fast_ms)
        floor = fast if state.floor_ms is None else state.floor_ms
        rise = min(1.0, (now - state.seen_at) / FLOOR_SECONDS)
        floor = fast if fast < floor else floor + rise * (fast - floor)
        state.fast_ms, state.floor_ms, state.seen_at = fast, floor, now
        if fast - floor > SLOWER_MS and fast > floor * (1 + self._slowdown):
            self._shrink(channel)

    def _shrink(self, channel: str) -> None:
        state = self._state(channel)
        now = self._clock()
        if now - state.shrunk_at < SHRINK_EVERY:
            return
        share = self.limit(channel)  # growth owed until now first
        state.ceiling = max(1, share - 1)
        state.share = share // 2
        state.shrunk_at = state.changed_at = now
