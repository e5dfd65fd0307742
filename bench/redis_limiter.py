"""CPU per call of the Redis limiter: ``acquire`` then ``settle``, as each call makes them.

``--callers`` concurrent callers (a worker's open calls) loop on one group's buckets in
the Redis at ``--redis`` (a fresh key prefix, deleted afterwards), on uvloop; prints
calls/s and µs of this process's CPU per call. The Redis server's own CPU is not counted.

    python -m bench.redis_limiter --calls 20000 --callers 64
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import uvloop

from parley.domain.groups import Quota
from parley.limits.base import Scope
from parley.limits.redis import RedisLimiter
from parley.limits.shared import redis_client_for
from parley.settings import RedisSettings


async def main(args: argparse.Namespace) -> None:
    client = redis_client_for(RedisSettings(url=args.redis))
    prefix = f"bench-{uuid.uuid4().hex[:12]}"
    limiter = RedisLimiter(client, prefix)
    scopes = [Scope("g:1", Quota(rpm=100_000_000, tpm=1_000_000_000))]
    left = 0

    async def caller() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            decision = await limiter.acquire(scopes, 100)
            if not decision.allowed:
                raise RuntimeError("refused: the bench's quota is too small")
            await limiter.settle(scopes, -40)

    left = 2_000  # warm-up: connections, scripts loaded
    await asyncio.gather(*(caller() for _ in range(args.callers)))
    left = args.calls
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(caller() for _ in range(args.callers)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{args.calls / wall:,.0f} calls/s, {cpu / args.calls * 1e6:.1f} µs CPU per call")
    cursor = b"0"
    while True:
        cursor, keys = await client.call("SCAN", cursor, "MATCH", f"{prefix}:*")
        if keys:
            await client.call("DEL", *keys)
        if cursor == b"0":
            break
    await client.aclose()


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--callers", type=int, default=64)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(arguments()))
