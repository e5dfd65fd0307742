"""Breakers shared by every worker and instance through Redis, off the hot path.

A call reads and changes only its process's ``Breakers``. When a breaker opens or
closes here, ``SharedBreakers`` writes its state to a Redis hash
(``<prefix>:breakers``, one field per breaker) and publishes it on the channel of the
same name, from a task of its own: no call waits on Redis. A background loop follows
the channel and applies the others' transitions (``Breakers.apply``), and reads the
whole hash when it (re)connects and every ``refresh_seconds``, so a message missed
during an outage is caught up.

The half-open probe is one across every instance: whoever takes the breaker's probe
lease, ``SET <prefix>:probe:<breaker> <instance> NX PX <lease>``, lets one call through
(``Breakers.grant``); the others skip the channel until the probe's outcome, shared as
any transition, closes or reopens the breaker everywhere, or the lease expires. The
instance that opened a breaker asks for the lease just before its cool-down ends: its
calls may start the probe for ``LEASE_GRACE_SECONDS``, and the lease is held that long
plus the probe's own (the channel's connect and first-token timeouts), so a probe that
starts late in the grace is covered however late its process gets to stretch the lease;
when the grace passes with no probe started here, the lease is given back at once, so
the others wait no longer than the grace. Any other instance asks when one
of its calls wanted the probe (a loop, every ``lease_poll_seconds``), so an instance
without calls for the channel never holds it for long. A lease is released (deleted if
still its own) once its probe's outcome is known.

The scheduled health checks (``runtime/health_checks.py``) take a lease of their own per
channel and interval, ``SET <prefix>:check:<channel> <instance> NX PX <interval>``
(``check_lease``): one instance checks a channel per interval; alerts take one per
episode, ``SET <prefix>:alert:<kind>:<subject> … NX PX`` (``alert_claim``), so an alert
every worker raises is audited and posted by one.

When Redis is unreachable each process keeps its own breakers and lets its own probe
through (one error line when it goes, one info line when it is back), as without Redis.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Coroutine
from typing import Any

import orjson

from parley.resp import RedisClient, RedisError
from parley.runtime.breaker import Breakers
from parley.runtime.circuit import Breaker, State, Transition
from parley.settings import RedisSettings

log = logging.getLogger("parley.breaker")

TIMEOUT_SECONDS = 1.0
LEASE_POLL_SECONDS = 0.2
LEASE_LEAD_SECONDS = 0.1
"""How long before a breaker's cool-down ends the instance that opened it asks for the
probe lease."""
LEASE_GRACE_SECONDS = 1.0
"""How long that lease waits for this instance's probe after the cool-down."""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
"""Delete a probe lease only if this instance still holds it."""
_STRETCH = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
"""Stretch a probe lease to the probe's own time, only if this instance holds it."""
KEEP_SECONDS = 86_400
"""How long the hash outlives its last change."""
_UNREACHABLE = (RedisError, OSError)
_SHARED = (State.OPEN, State.CLOSED)


class SharedBreakers:
    """Publishes this process's breaker transitions and applies everyone else's."""

    def __init__(
        self,
        breakers: Breakers,
        client: RedisClient,
        prefix: str,
        *,
        refresh_seconds: float = 2.0,
        retry_seconds: float = 5.0,
        lease_poll_seconds: float = LEASE_POLL_SECONDS,
    ) -> None:
        self._breakers = breakers
        self._client = client
        self._key = f"{prefix}:breakers"
        self._lease_prefix = f"{prefix}:probe:"
        self._check_prefix = f"{prefix}:check:"
        self._alert_prefix = f"{prefix}:alert:"
        self._lease_poll = lease_poll_seconds
        self._held: dict[str, float] = {}
        """Breakers whose probe lease this instance took, and when it ends."""
        self._lost: dict[str, float] = {}
        """Breakers whose lease another instance holds: when to ask again."""
        self._timers: set[asyncio.TimerHandle] = set()
        self._me = secrets.token_hex(8)
        self._refresh = refresh_seconds
        self._retry = retry_seconds
        self._writes: set[asyncio.Task[None]] = set()
        self._down = False
        self.connected = asyncio.Event()
        """Set once the loop has read the hash and follows the channel."""
        breakers.transitions.append(self._changed)

    @classmethod
    def connect(cls, breakers: Breakers, settings: RedisSettings) -> SharedBreakers:
        client = RedisClient.from_url(
            settings.url, timeout=TIMEOUT_SECONDS, connect_timeout=TIMEOUT_SECONDS
        )
        return cls(breakers, client, settings.prefix, retry_seconds=settings.retry_seconds)

    def _changed(self, change: Transition) -> None:
        key = change.key
        if change.state in _SHARED:
            self._lost.pop(key, None)
            if self._held.pop(key, None) is not None:  # the probe's outcome (anywhere)
                self._spawn(self._release(key))
        elif key in self._held and not change.remote:  # this instance's probe is under way
            self._spawn(self._stretch(key))
        if change.remote or change.state not in _SHARED:
            return
        if change.state == State.OPEN:
            self._lease_before(change)
        self._spawn(self._write(change))

    def _lease_before(self, change: Transition) -> None:
        """Ask for the probe lease of a breaker this instance opened just before its
        cool-down ends."""
        delay = max(0.0, change.until - self._breakers.now() - LEASE_LEAD_SECONDS)
        loop = asyncio.get_running_loop()
        timer = loop.call_later(delay, self._lease_due, change.key, change.until)
        self._timers.add(timer)

    def _lease_due(self, key: str, until: float) -> None:
        self._timers = {timer for timer in self._timers if not timer.cancelled()}
        breaker = self._breakers.find(key)
        if breaker is None or breaker.state != State.OPEN or breaker.until != until:
            return  # closed, or reopened since (a new cool-down, a new lease)
        if not self.connected.is_set():
            return
        seconds = until - self._breakers.now() + LEASE_GRACE_SECONDS
        self._spawn(self._lease(breaker, seconds))

    async def _lease(self, breaker: Breaker, seconds: float) -> None:
        """The opener's lease: probes may start here for ``seconds``; it is held the
        probe's lease longer, and given back if no probe started (``_unused``)."""
        try:
            taken = await self._take_lease(breaker, seconds, breaker.probe_lease)
        except _UNREACHABLE as exc:
            self._went_down(exc)
            return
        if taken:
            loop = asyncio.get_running_loop()
            timer = loop.call_later(seconds, self._unused, breaker.key)
            self._timers.add(timer)

    def _unused(self, key: str) -> None:
        """The opener's grace is over: its lease goes back unless a probe started here
        (half-open: the probe's outcome releases it) or the breaker moved on."""
        self._timers = {timer for timer in self._timers if not timer.cancelled()}
        breaker = self._breakers.find(key)
        if breaker is None or breaker.state != State.OPEN:
            return
        if self._held.pop(key, None) is not None:
            self._spawn(self._release(key))

    async def check_lease(self, channel: str, seconds: float) -> bool:
        """Whether this instance checks ``channel`` this interval (``seconds``): it took
        the check lease, or Redis cannot be asked (each instance then checks itself)."""
        return await self._claim(self._check_prefix + channel, seconds)

    async def alert_claim(self, episode: str, seconds: float) -> bool:
        """Whether this instance audits and posts alert ``episode`` (``kind:subject``):
        no other did within ``seconds``, or Redis cannot be asked."""
        return await self._claim(self._alert_prefix + episode, seconds)

    async def _claim(self, name: str, seconds: float) -> bool:
        try:
            taken = await self._client.call(
                "SET", name, self._me, "NX", "PX", max(1, int(seconds * 1000))
            )
        except _UNREACHABLE as exc:
            self._went_down(exc)
            return True
        return bool(taken)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, change: Transition) -> None:
        value = orjson.dumps(
            {
                "key": change.key,
                "state": int(change.state),
                "until": change.until,
                "error": change.error,
                "from": self._me,
            }
        )
        try:
            await self._client.transaction(
                [
                    ("HSET", self._key, change.key, value),
                    ("EXPIRE", self._key, KEEP_SECONDS),
                    ("PUBLISH", self._key, value),
                ]
            )
        except _UNREACHABLE as exc:
            self._went_down(exc)

    async def _release(self, key: str) -> None:
        try:
            await self._client.call("EVAL", _RELEASE, 1, self._lease_prefix + key, self._me)
        except _UNREACHABLE as exc:
            self._went_down(exc)

    async def _stretch(self, key: str) -> None:
        breaker = self._breakers.find(key)
        if breaker is None:
            return
        self._held[key] = self._breakers.now() + breaker.probe_lease
        lease_ms = max(1, int(breaker.probe_lease * 1000))
        try:
            await self._client.call(
                "EVAL", _STRETCH, 1, self._lease_prefix + key, self._me, lease_ms
            )
        except _UNREACHABLE as exc:
            self._went_down(exc)

    async def run(self) -> None:
        """Follow the others' transitions and take probe leases until cancelled,
        reconnecting after outages."""
        leases = asyncio.get_running_loop().create_task(self._lease_loop())
        try:
            while True:
                try:
                    await self._follow()
                except _UNREACHABLE as exc:
                    self.connected.clear()
                    self._breakers.leased = False
                    self._went_down(exc)
                    await asyncio.sleep(self._retry)
        finally:
            leases.cancel()

    async def _lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self._lease_poll)
            if not self.connected.is_set():
                continue
            try:
                for breaker in self._breakers.lease_wanted():
                    await self._take_lease(breaker, breaker.probe_lease)
            except _UNREACHABLE as exc:
                self._went_down(exc)

    async def _take_lease(self, breaker: Breaker, seconds: float, more: float = 0.0) -> bool:
        """Try to take ``breaker``'s probe lease: a probe may start here for ``seconds``,
        and the lease is held ``more`` seconds longer. When another instance holds it,
        ask again once it expires. Whether it was taken."""
        key, now = breaker.key, self._breakers.now()
        if self._lost.get(key, 0.0) > now or self._held.get(key, 0.0) > now:
            return False
        name = self._lease_prefix + key
        held = max(1, int((seconds + more) * 1000))
        if await self._client.call("SET", name, self._me, "NX", "PX", held):
            self._held[key] = now + seconds + more
            self._breakers.grant(key, now + seconds)
            return True
        left = await self._client.call("PTTL", name)
        self._lost[key] = now + max(left, 50) / 1000
        return False

    async def _follow(self) -> None:
        pubsub = self._client.pubsub()
        try:
            await pubsub.subscribe(self._key)
            await self._load()
            self._came_back()
            self.connected.set()
            self._breakers.leased = True
            clock = asyncio.get_running_loop().time
            next_load = clock() + self._refresh
            while True:
                message = await pubsub.get_message(min(self._refresh, TIMEOUT_SECONDS))
                if message is not None:
                    self._apply(message)
                if clock() >= next_load:
                    await self._load()
                    next_load = clock() + self._refresh
        finally:
            await pubsub.aclose()

    async def _load(self) -> None:
        fields = await self._client.call("HGETALL", self._key)
        for value in fields[1::2]:  # field, value, field, value, …
            self._apply(value)

    def _apply(self, raw: Any) -> None:
        try:
            found = orjson.loads(raw)
            if found.get("from") == self._me:
                return
            state = State(int(found["state"]))
            key, until, error = str(found["key"]), float(found["until"]), str(found["error"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            log.warning("ignored a malformed shared breaker state")
            return
        if state in _SHARED:
            self._breakers.apply(key, state, until, error)

    def _went_down(self, exc: BaseException) -> None:
        if not self._down:
            self._down = True
            log.warning(  # the limiter reports the outage itself as an error
                "Redis is unreachable for the shared breakers (%s); each process keeps its "
                "own until it is back",
                type(exc).__name__,
            )

    def _came_back(self) -> None:
        if self._down:
            self._down = False
            log.info("Redis is reachable again; breakers are shared again")

    async def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        for task in list(self._writes):
            task.cancel()
        try:
            await self._client.aclose()
        except _UNREACHABLE:
            return
