"""A gateway on the memory limiter never loads redis-py (about 6 MB of every worker);
one on Redis gets the failover-wrapped Redis limiter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from parley.limits.factory import build_limiter
from parley.limits.failover import FailoverLimiter
from parley.limits.memory import MemoryLimiter
from parley.settings import LimitSettings, RedisSettings

REPO = Path(__file__).resolve().parents[3]
BUILD_MEMORY = """
import sys
import parley.app, parley.cli.serve
from parley.limits.factory import build_limiter
from parley.settings import LimitSettings
print(type(build_limiter(LimitSettings(), None)).__name__, "redis" in sys.modules)
"""


def test_the_memory_limiter_is_built_without_loading_redis() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BUILD_MEMORY], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["MemoryLimiter", "False"]


async def test_the_redis_backend_is_the_failover_limiter() -> None:
    limiter = build_limiter(LimitSettings(backend="redis"), RedisSettings())
    try:
        assert isinstance(limiter, FailoverLimiter)
        assert isinstance(build_limiter(LimitSettings(), None), MemoryLimiter)
    finally:
        await limiter.close()
