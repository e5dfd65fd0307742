"""Breakers shared by every worker and instance through Redis, off the hot path.

A call reads and changes only its process's ``Breakers``. When a breaker opens or
closes here, ``SharedBreakers`` writes its state to a Redis hash
(``<prefix>:breakers``, one field per breaker) and publishes it on the channel of the
same name, from a task of its own: no call waits on Redis. A background loop follows
the channel and applies the others' transitions (``Breakers.apply``), and reads the
whole hash when it (re)connects and every ``refresh_seconds``, so a message missed
during an outage is caught up. Half-open is not shared: each process lets its own
probe through once the cool-down is over.

When Redis is unreachable each process keeps its own breakers (one error line when it
goes, one info line when it is back), as without Redis.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from parley.pipeline.breaker import Breakers, State, Transition
from parley.settings import RedisSettings

log = logging.getLogger("parley.breaker")

TIMEOUT_SECONDS = 1.0
KEEP_SECONDS = 86_400
"""How long the hash outlives its last change."""
_UNREACHABLE = (RedisError, OSError)
_SHARED = (State.OPEN, State.CLOSED)


class SharedBreakers:
    """Publishes this process's breaker transitions and applies everyone else's."""

    def __init__(
        self,
        breakers: Breakers,
        client: Redis,
        prefix: str,
        *,
        refresh_seconds: float = 2.0,
        retry_seconds: float = 5.0,
    ) -> None:
        self._breakers = breakers
        self._client = client
        self._key = f"{prefix}:breakers"
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
        client = Redis.from_url(
            settings.url,
            socket_connect_timeout=TIMEOUT_SECONDS,
            socket_timeout=TIMEOUT_SECONDS,
        )
        return cls(breakers, client, settings.prefix, retry_seconds=settings.retry_seconds)

    def _changed(self, change: Transition) -> None:
        if change.remote or change.state not in _SHARED:
            return
        task = asyncio.get_running_loop().create_task(self._write(change))
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
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hset(self._key, change.key, value)
                pipe.expire(self._key, KEEP_SECONDS)
                pipe.publish(self._key, value)
                await pipe.execute()
        except _UNREACHABLE as exc:
            self._went_down(exc)

    async def run(self) -> None:
        """Follow the others' transitions until cancelled, reconnecting after outages."""
        while True:
            try:
                await self._follow()
            except _UNREACHABLE as exc:
                self.connected.clear()
                self._went_down(exc)
                await asyncio.sleep(self._retry)

    async def _follow(self) -> None:
        pubsub = self._client.pubsub()
        try:
            await pubsub.subscribe(self._key)
            await self._load()
            self._came_back()
            self.connected.set()
            clock = asyncio.get_running_loop().time
            next_load = clock() + self._refresh
            while True:
                message = await pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=min(self._refresh, TIMEOUT_SECONDS)
                )
                if message is not None and message.get("type") == "message":
                    self._apply(message["data"])
                if clock() >= next_load:
                    await self._load()
                    next_load = clock() + self._refresh
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _load(self) -> None:
        for value in (await self._client.hgetall(self._key)).values():
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
        for task in list(self._writes):
            task.cancel()
        try:
            await self._client.aclose()
        except _UNREACHABLE:
            return
