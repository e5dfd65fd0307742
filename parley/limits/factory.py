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

The Redis parts (``parley.limits.shared``, and Parley's Redis client ``parley.resp``)
are imported only when the settings ask for Redis: a gateway without Redis need not
carry them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from parley.limits.base import Limiter
from parley.limits.memory import MemoryLimiter
from parley.settings import LimitSettings, RedisSettings

if TYPE_CHECKING:
    from parley.resp import RedisClient


def build_limiter(
    settings: LimitSettings,
    redis_settings: RedisSettings | None,
    *,
    redis_client: RedisClient | None = None,
    logger: logging.Logger | None = None,
) -> Limiter:
    if settings.backend == "memory":
        return MemoryLimiter()
    if redis_settings is None:
        raise ValueError("limits.backend is redis but no redis section is set")
    from parley.limits.shared import shared_limiter  # only with Redis: see the docstring

    return shared_limiter(redis_settings, redis_client=redis_client, logger=logger)
