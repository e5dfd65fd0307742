"""How many PostgreSQL transactions a flood of distinct wrong keys costs.

A gateway (in this process, on a PostgreSQL database of its own that is dropped at the
end) gets ``--keys`` calls, each with a fresh random key, ``--concurrency`` at a time. The
database's committed and rolled-back transactions are read from ``pg_stat_database``
before and after: they include the directory refresh and the pool's pings over the run,
so the figure is an upper bound on what the wrong keys cost.

    python -m bench.wrong_key_flood               # 2,000 keys, 50 at a time

Figures, not a test. Needs PostgreSQL at 127.0.0.1:5432 (user postgres, database test).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp
import asyncpg

from tests.api.harness import Gateway, default_config
from tests.process.conftest import POSTGRES_ADMIN_URL, PostgresDatabase
from tests.upstreams.openai_compatible import FakeEngine

SETTLE_SECONDS = 2.5
"""PostgreSQL publishes a backend's statistics within about a second; wait past that."""


async def transactions(database: str) -> int:
    connection = await asyncpg.connect(POSTGRES_ADMIN_URL)
    try:
        count: int = await connection.fetchval(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1",
            database,
        )
        return count
    finally:
        await connection.close()


async def flood(gateway: Gateway, keys: int, concurrency: int) -> Counter[int]:
    statuses: Counter[int] = Counter()
    gate = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session:

        async def one() -> None:
            headers = {"Authorization": f"Bearer pk-{secrets.token_urlsafe(32)}"}
            async with gate, session.get(f"{gateway.v1}/models", headers=headers) as reply:
                statuses[reply.status] += 1

        await asyncio.gather(*(one() for _ in range(keys)))
    return statuses


async def measure(keys: int, concurrency: int) -> None:
    database = PostgresDatabase()
    await database.acreate()
    try:
        async with FakeEngine() as engine:
            config = default_config(engine.base_url, Path(tempfile.mkdtemp()))
            config["database"] = {"url": database.url}
            gateway = await Gateway.start(config)
            try:
                await asyncio.sleep(SETTLE_SECONDS)
                before = await transactions(database.name)
                started = time.monotonic()
                statuses = await flood(gateway, keys, concurrency)
                elapsed = time.monotonic() - started
                await asyncio.sleep(SETTLE_SECONDS)
                spent = await transactions(database.name) - before
            finally:
                await gateway.stop()
    finally:
        await database.adrop()
    print(
        f"{keys} random keys in {elapsed:.2f} s: {dict(statuses)}; {spent} PostgreSQL "
        f"transactions in the {elapsed + SETTLE_SECONDS:.1f} s measured"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(measure(args.keys, args.concurrency))


if __name__ == "__main__":
    main()
