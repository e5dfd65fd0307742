"""How many usage records a second the store writes: ``SqlStore.record_usage`` alone.

Writes ``--records`` fresh records (as the gateway makes them: now, a few keys, groups and
models) in batches of each ``--batch`` size, on a fresh SQLite file and/or a fresh
PostgreSQL schema, and prints records/s and the CPU this process spent per record (the
driver's thread included). Every batch also updates the daily rollups and the keys'
``last_used_at``, as the usage writer's batches do. At the end the rollups are checked
against the records written, so a faster writer cannot be a wrong one.

    python -m bench.usage_writer                       # SQLite and PostgreSQL, 100/500/1000
    python -m bench.usage_writer --backend sqlite --batch 500 --profile /tmp/writer.prof
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime

from bench.usage_endpoint import POSTGRES_URL, on_each_backend
from parley.domain.usage import UsageRecord
from parley.store.sql import SqlStore

KEYS = 8
MODELS = ("chat-large", "chat-small", "tts-1")


def record(prefix: str, index: int, now: datetime) -> UsageRecord:
    """The ``index``-th of a run's records: two groups, ``KEYS`` keys, three models."""
    return UsageRecord(
        request_id=f"{prefix}-{index:09d}",
        created_at=now,
        group_id=1 + index % 2,
        key_id=1 + index % KEYS,
        model=MODELS[index % len(MODELS)],
        channel="main",
        endpoint="/v1/chat/completions",
        status=200,
        latency_ms=40,
        prompt_tokens=12,
        completion_tokens=30,
        cost_nanos=4_200,
    )


def records(count: int, prefix: str) -> Iterator[UsageRecord]:
    for index in range(count):
        yield record(prefix, index, datetime.now(UTC))


async def prepare(store: SqlStore) -> None:
    """Two groups and ``KEYS`` keys, so the ``last_used_at`` stamps touch real rows."""
    await store.migrate()
    first = await store.create_group("bench-a")
    second = await store.create_group("bench-b")
    for index in range(KEYS):
        group = first if index % 2 == 0 else second
        await store.create_key(
            group.id, name=f"k{index}", digest=f"{index:064d}", prefix=f"pk{index}"
        )


async def measure(store: SqlStore, count: int, size: int, run: str) -> tuple[float, float]:
    """Records/s and µs of CPU per record, for ``count`` records in batches of ``size``."""
    batch: list[UsageRecord] = []
    written = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for record in records(count, f"{run}-{size}"):
        batch.append(record)
        if len(batch) == size:
            written += await store.record_usage(batch)
            batch = []
    if batch:
        written += await store.record_usage(batch)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if written != count:
        raise RuntimeError(f"wrote {written} of {count} records")
    return count / wall, cpu / count * 1e6


async def check(store: SqlStore, expected: int) -> None:
    total = await store.count_usage()
    today = datetime.now(UTC).date()
    rolled = 0
    for group in (1, 2):
        rows = await store.daily_usage(group, date(2000, 1, 1), date(today.year + 1, 1, 1))
        rolled += sum(row.requests for row in rows)
    if total != expected or rolled != expected:
        raise RuntimeError(f"{expected} written, {total} stored, {rolled} in the rollups")
    used = await store.keys_last_used()
    if len(used) != KEYS:
        raise RuntimeError(f"last_used_at set on {len(used)} of {KEYS} keys")


async def spin() -> None:
    """One of ``--busy`` tasks standing for a worker's connections at full rate: each
    turn of the event loop, each spends 150 µs of CPU (about one call) and yields."""
    while True:
        until = time.perf_counter() + 150e-6
        while time.perf_counter() < until:
            pass
        await asyncio.sleep(0)


async def run(name: str, store: SqlStore, args: argparse.Namespace) -> None:
    busy = [asyncio.create_task(spin()) for _ in range(args.busy)]
    try:
        await _run(name, store, args)
    finally:
        for task in busy:
            task.cancel()


async def _run(name: str, store: SqlStore, args: argparse.Namespace) -> None:
    await prepare(store)
    await measure(store, 2_000, 500, "warm")  # warm-up: pool, statement caches
    expected = 2_000
    for size in args.batch:
        rate, cpu = await measure(store, args.records, size, "run")
        expected += args.records
        print(
            f"{name:8} batch {size:5}: {rate:9,.0f} records/s  {cpu:6.1f} µs CPU/record"
            + (f"  ({args.busy} busy tasks: CPU includes theirs)" if args.busy else "")
        )
    await check(store, expected)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000, help="per batch size")
    parser.add_argument("--batch", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--postgres", default=POSTGRES_URL, help="database URL")
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="N tasks keep the event loop busy meanwhile, as a loaded worker's calls do",
    )
    parser.add_argument("--profile", help="write a cProfile of the runs to this file")
    return parser.parse_args()


async def main(args: argparse.Namespace) -> None:
    await on_each_backend(args, run)


if __name__ == "__main__":
    options = arguments()
    if options.profile:
        with cProfile.Profile() as profile:
            asyncio.run(main(options))
        profile.dump_stats(options.profile)
    else:
        asyncio.run(main(options))
