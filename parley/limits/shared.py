"""The Redis limiter as ``build_limiter`` (``parley.limits.factory``) builds it: a
``RedisLimiter`` on a fail-fast client, wrapped in a ``FailoverLimiter`` whose fallback is
a ``MemoryLimiter``. See the factory's docstring for the client's retry rules.
"""

from __future__ import annotations

import logging

from parley.limits.base import Limiter
from parley.limits.failover import FailoverLimiter
from parley.limits.memory import MemoryLimiter
from parley.limits.redis import RedisLimiter
from parley.resp import RedisClient
from parley.settings import RedisSettings

REDIS_TIMEOUT_SECONDS = 1.0
"""Connect and read timeout of the limiter's own Redis client: the most a call waits.
(The client retries a connection error once, at once, and never a timeout: a retry
would double the wait; see ``parley.resp``.)"""


def shared_limiter(
    settings: RedisSettings,
    *,
    redis_client: RedisClient | None = None,
    logger: logging.Logger | None = None,
) -> Limiter:
    owns_client = redis_client is None
    client = redis_client if redis_client is not None else redis_client_for(settings)
    return FailoverLimiter(
        RedisLimiter(client, settings.prefix, owns_client=owns_client),
        MemoryLimiter(),
        on_failure=settings.on_failure,
        retry_seconds=settings.retry_seconds,
        logger=logger,
    )


def redis_client_for(settings: RedisSettings) -> RedisClient:
    """A client for the limiter that gives up quickly when Redis is away."""
    return RedisClient.from_url(
        settings.url, timeout=REDIS_TIMEOUT_SECONDS, connect_timeout=REDIS_TIMEOUT_SECONDS
    )
