"""How fast the request log's queries are with a big usage table.

Fills a store with ``--records`` usage records (``bench.usage_endpoint``'s, one in a
hundred turned into a 429 refusal), then times ``list_requests`` (one page of 51 lines)
for the filters an operator uses and ``failures_by_day`` (the overview's count), and
prints the p50 of each. SQLite on a fresh file; PostgreSQL on a fresh schema.

    python -m bench.request_log --records 200000 --backend sqlite   # from the repo root
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy import Connection, text

from bench.usage_endpoint import POSTGRES_URL, postgres_store, records, sqlite_store
from parley.domain.requests import RequestQuery, StatusFilter
from parley.domain.usage import UsageRecord
from parley.store.sql import SqlStore

PAGE = 51
QUERIES = {
    "first page, no filter": RequestQuery(limit=PAGE),
    "one group": RequestQuery(group_id=3, limit=PAGE),
    "status 429 (1 in 100)": RequestQuery(status=StatusFilter(429, 429), limit=PAGE),
    "status 4xx": RequestQuery(status=StatusFilter(400, 499), limit=PAGE),
    "status 404 (none)": RequestQuery(status=StatusFilter(404, 404), limit=PAGE),
}


def refusal(record: UsageRecord) -> UsageRecord:
    return replace(record, status=429, error_code="rate_limit_exceeded", admitted=False)


async def fill(store: SqlStore, count: int) -> None:
    batch = []
    for index, record in enumerate(records(count)):
        batch.append(refusal(record) if index % 100 == 0 else record)
        if len(batch) == 5_000:
            await store.record_usage(batch)
            batch = []
    if batch:
        await store.record_usage(batch)


async def p50(work: Callable[[], Awaitable[object]], repeat: int) -> float:
    await work()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        await work()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def analyze(conn: Connection) -> None:
    """PostgreSQL's planner statistics, as autovacuum keeps them on a table this size
    (SQLite plans without them, as a served file does)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("ANALYZE usage_records"))


def page_of(store: SqlStore, query: RequestQuery) -> Callable[[], Awaitable[object]]:
    return lambda: store.list_requests(query)


async def run(name: str, store: SqlStore, args: argparse.Namespace) -> None:
    await store.migrate()
    await fill(store, args.records)
    await store.database.transaction(analyze)
    for label, query in QUERIES.items():
        took = await p50(page_of(store, query), args.repeat)
        print(f"{name}: {label}: p50 {took:.1f} ms")
    since = datetime(2000, 1, 1, tzinfo=UTC)
    overview = await p50(lambda: store.failures_by_day(since), args.repeat)
    print(f"{name}: failures_by_day: p50 {overview:.1f} ms")


async def main(args: argparse.Namespace) -> None:
    if args.backend in ("sqlite", "both"):
        async with sqlite_store() as store:
            await run("sqlite", store, args)
    if args.backend in ("postgres", "both"):
        async with postgres_store(args.postgres) as store:
            await run("postgres", store, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--postgres", default=POSTGRES_URL)
    asyncio.run(main(parser.parse_args()))
