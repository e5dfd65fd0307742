"""How fast the billing usage endpoint's query is with a big usage table.

Fills a store with ``--records`` usage records (5 groups, 4 models, spread over 60 days)
through ``SqlStore.record_usage`` in batches, then times ``daily_usage`` for a 30-day
range and prints p50/p99 latency per backend. SQLite uses a fresh file in a temporary
folder; PostgreSQL a fresh schema (dropped afterwards) in the database at ``--postgres``.

    python -m bench.usage_endpoint --records 100000 --backend both   # from the repo root
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import asyncpg

from parley.domain.usage import UsageRecord
from parley.store.sql import SqlStore, open_store

GROUPS = (1, 2, 3, 4, 5)
MODELS = ("gpt-4o", "gpt-4o-mini", "tts-1", "whisper-1")
DAYS = 60
FIRST_DAY = datetime(2025, 1, 1, tzinfo=UTC)
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


def records(count: int, seed: int = 1) -> Iterator[UsageRecord]:
    rng = random.Random(seed)
    span_ms = DAYS * 86_400_000
    for index in range(count):
        yield UsageRecord(
            request_id=f"bench-{index:09d}",
            created_at=FIRST_DAY + timedelta(milliseconds=rng.randrange(span_ms)),
            group_id=rng.choice(GROUPS),
            key_id=1,
            model=rng.choice(MODELS),
            channel="main",
            endpoint="/v1/chat/completions",
            status=200,
            latency_ms=rng.randrange(50, 2_000),
            prompt_tokens=rng.randrange(10, 2_000),
            completion_tokens=rng.randrange(1, 500),
            cost_nanos=rng.randrange(1_000, 5_000_000),
        )


def batches(count: int, size: int) -> Iterator[list[UsageRecord]]:
    batch: list[UsageRecord] = []
    for record in records(count):
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


async def fill(store: SqlStore, count: int, batch_size: int) -> float:
    """Write ``count`` records; returns the seconds it took."""
    started = time.perf_counter()
    written = 0
    for batch in batches(count, batch_size):
        written += await store.record_usage(batch)
    if written != count:
        raise RuntimeError(f"wrote {written} of {count} records")
    return time.perf_counter() - started


async def time_queries(store: SqlStore, repeat: int) -> tuple[list[float], int]:
    """Latencies in ms of ``daily_usage`` over 30 days, and the rows one call returns."""
    start = FIRST_DAY.date() + timedelta(days=15)
    end = start + timedelta(days=30)
    latencies: list[float] = []
    rows = 0
    for index in range(repeat):
        group = GROUPS[index % len(GROUPS)]
        began = time.perf_counter()
        rows = len(await store.daily_usage(group, start, end))
        latencies.append((time.perf_counter() - began) * 1000)
    return latencies, rows


@asynccontextmanager
async def sqlite_store() -> AsyncIterator[SqlStore]:
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(f"sqlite:///{Path(folder) / 'bench.db'}")
        try:
            yield store
        finally:
            await store.close()


@asynccontextmanager
async def postgres_store(url: str) -> AsyncIterator[SqlStore]:
    schema = f"bench_{secrets.token_hex(6)}"
    admin = await asyncpg.connect(url)
    try:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        store = await open_store(url, schema=schema)
        try:
            yield store
        finally:
            await store.close()
            await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await admin.close()


async def run(name: str, store: SqlStore, args: argparse.Namespace) -> None:
    await store.migrate()
    seconds = await fill(store, args.records, args.batch)
    print(f"{name}: wrote {args.records:,} records in {seconds:.1f} s", end=" ")
    print(f"({args.records / seconds:,.0f} records/s)")
    await time_queries(store, 10)  # warm the pool and caches
    latencies, rows = await time_queries(store, args.repeat)
    cuts = statistics.quantiles(latencies, n=100)
    print(
        f"{name}: daily_usage over 30 days ({rows} rows), {args.repeat} calls: "
        f"p50 {cuts[49]:.2f} ms, p99 {cuts[98]:.2f} ms, max {max(latencies):.2f} ms"
    )
    spend = await store.spend_since(date(2000, 1, 1))
    print(f"{name}: rollups hold {sum(spend.values()):,} nano-dollars across {len(spend)} groups")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--postgres", default=POSTGRES_URL, help="database URL")
    return parser.parse_args()


async def on_each_backend(
    args: argparse.Namespace, run: Callable[[str, SqlStore, argparse.Namespace], Awaitable[None]]
) -> None:
    """``run`` on SQLite and/or PostgreSQL, as ``--backend`` says (this bench and
    ``bench.usage_writer``)."""
    if args.backend in ("sqlite", "both"):
        async with sqlite_store() as store:
            await run("sqlite", store, args)
    if args.backend in ("postgres", "both"):
        async with postgres_store(args.postgres) as store:
            await run("postgres", store, args)


async def main() -> None:
    await on_each_backend(arguments(), run)


if __name__ == "__main__":
    asyncio.run(main())
