"""Build the limiter the settings ask for.

``memory`` is a ``MemoryLimiter``; ``redis`` is a ``RedisLimiter`` wrapped in a
``FailoverLimiter`` whose fallback is a ``MemoryLimiter``. The Redis client built here fails
fast, so an outage costs a call at most ``REDIS_TIMEOUT_SECONDS``, not the client's default
retry schedule:

- a connection error (refused, reset: e.g. a pooled connection Redis dropped when it
  restarted) is retried once, at once, on a new connection, which costs milliseconds;
- a timeout (a hung or frozen Redis, a black-holed network) is never retried: a retry
  would wait the whole timeout again, and the ``FailoverLimiter`` already answers the call
  from the fallback (or with a 503).

Close the client with the limiter's ``close``. A client passed in is shared with its
owner, who closes it.
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from parley.limits.base import Limiter
from parley.limits.failover import FailoverLimiter
from parley.limits.memory import MemoryLimiter
from parley.limits.redis import RedisLimiter
from parley.settings import LimitSettings, RedisSettings

REDIS_TIMEOUT_SECONDS = 1.0
"""Connect and read timeout of the limiter's own Redis client: the most a call waits."""
RETRIED_ERRORS = (RedisConnectionError,)
"""Retried once, at once. Not ``TimeoutError``: a retry would double the wait."""


def build_limiter(
    settings: LimitSettings,
    redis_settings: RedisSettings | None,
    *,
    redis_client: Redis | None = None,
    logger: logging.Logger | None = None,
) -> Limiter:
    if settings.backend == "memory":
        return MemoryLimiter()
    if redis_settings is None:
        raise ValueError("limits.backend is redis but no redis section is set")
    owns_client = redis_client is None
    client = redis_client if redis_client is not None else redis_client_for(redis_settings)
    return FailoverLimiter(
        RedisLimiter(client, redis_settings.prefix, owns_client=owns_client),
        MemoryLimiter(),
        on_failure=redis_settings.on_failure,
        retry_seconds=redis_settings.retry_seconds,
        logger=logger,
    )


def redis_client_for(settings: RedisSettings) -> Redis:
    """A client for the limiter that gives up quickly when Redis is away."""
    return Redis.from_url(
        settings.url,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 1, supported_errors=RETRIED_ERRORS),
    )
