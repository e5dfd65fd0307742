"""How many calls a second N workers can meter into one database before one refuses.

Starts ``--processes`` processes, each a worker's metering alone: the gateway's own usage
writer (``UsageWriter`` on ``open_store``, default settings) fed ``--rate`` ÷ N records a
second each, as a worker at that share of the load makes them, in ticks of 5 ms. A record
that arrives while its worker's queue is full (``UsageWriter.overloaded``, where the
gateway answers 503 "catching up on usage records") is counted as refused, not queued.
After ``--seconds`` each process writes out its queue and exits; the database must then
hold every admitted record, and its rollups must count them.

Prints, per run: the calls/s offered, how many were refused, the rows/s written while
the load ran, each write's time (p50, p99, max) and the longest queue a worker had.
``--rate`` takes several values, so one command finds where refusals start:

    python -m bench.usage_workers --processes 8 --rate 20000 40000 80000
    python -m bench.usage_workers --backend postgres --processes 8 --rate 40000
    python -m bench.usage_workers --processes 2 --busy 64 --rate 10000   # loaded event loops

``--busy K`` adds K tasks to each process that spend 150 µs of CPU a turn of the event
loop, as a worker's calls do at full load: the writer's thread then waits for the GIL
between statements, as it does in a loaded worker. Each such process takes a whole core,
so use no more of them than the machine has cores to spare.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from bench.usage_endpoint import POSTGRES_URL
from bench.usage_writer import KEYS, record
from parley.cli.supervisor import _host_writer, _start_host, _stop_host
from parley.runtime.budget import SpendLedger
from parley.runtime.writer import UsageWriter
from parley.settings import Settings, UsageSettings
from parley.store.sql import SqlStore, open_store

TICK_SECONDS = 0.005
START_DELAY_SECONDS = 4.0
"""The processes start writing together, this long after the parent started them."""


async def spin() -> None:
    while True:
        until = time.perf_counter() + 150e-6
        while time.perf_counter() < until:
            pass
        await asyncio.sleep(0)


async def worker(args: argparse.Namespace) -> dict[str, Any]:
    """One worker's metering at ``args.rate`` records a second (its share)."""
    store = await open_store(args.url, schema=args.schema, usage_socket=args.socket)
    with tempfile.TemporaryDirectory() as spill:
        writer = UsageWriter(store, SpendLedger(store, "month"), UsageSettings(spill_dir=spill))
        writes: list[float] = []
        failed = 0

        def observe(seconds: float, ok: bool) -> None:
            nonlocal failed
            writes.append(seconds)
            failed += not ok

        writer.on_batch = observe
        await writer.start()
        busy = [asyncio.create_task(spin()) for _ in range(args.busy)]
        await asyncio.sleep(max(0.0, args.start_at - time.time()))
        loop = asyncio.get_running_loop()
        began, cpu = loop.time(), time.process_time()
        made = refused = peak = 0
        while (elapsed := loop.time() - began) < args.seconds:
            now = datetime.now(UTC)
            for _ in range(int(elapsed * args.rate) - made):
                if writer.overloaded:
                    refused += 1
                else:
                    writer.submit(record(args.tag, made, now))
                made += 1
            peak = max(peak, writer.backlog)
            await asyncio.sleep(TICK_SECONDS)
        written_in_time, cpu = writer.written, time.process_time() - cpu
        for task in busy:
            task.cancel()
        await writer.close()
        await store.close()
    return {
        "made": made,
        "refused": refused,
        "written_in_time": written_in_time,
        "written": writer.written,
        "peak": peak,
        "writes": writes,
        "failed": failed,
        "cpu": cpu,
    }


def start_worker(
    args: argparse.Namespace,
    *,
    url: str,
    schema: str | None,
    socket: str | None,
    rate: float,
    tag: str,
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "bench.usage_workers",
        "--worker",
        "--url",
        url,
        "--rate",
        str(rate),
        "--seconds",
        str(args.seconds),
        "--busy",
        str(args.busy),
        "--tag",
        tag,
        "--start-at",
        str(time.time() + START_DELAY_SECONDS),
    ]
    if schema:
        command += ["--schema", schema]
    if socket:
        command += ["--socket", socket]
    return subprocess.Popen(command, stdout=subprocess.PIPE, env={**os.environ})


async def prepare(store: SqlStore) -> None:
    await store.migrate()
    first = await store.create_group("bench-a")
    second = await store.create_group("bench-b")
    for index in range(KEYS):
        group = first if index % 2 == 0 else second
        await store.create_key(
            group.id, name=f"k{index}", digest=f"{index:064d}", prefix=f"pk{index}"
        )


async def one_run(
    name: str, args: argparse.Namespace, *, url: str, schema: str | None, rate: float, run: str
) -> None:
    share = rate / args.processes
    host = socket = None
    host_began = 0.0
    if name == "sqlite/host":
        socket, host = start_host(url)
        host_began = cpu_seconds(host.pid) if host is not None else 0.0  # its start-up
    children = [
        start_worker(args, url=url, schema=schema, socket=socket, rate=share, tag=f"{run}w{index}")
        for index in range(args.processes)
    ]
    results = []
    for child in children:
        out, _ = await asyncio.to_thread(child.communicate)
        if child.returncode != 0:
            raise RuntimeError(f"a worker exited with {child.returncode}")
        results.append(json.loads(out))
    host_cpu = 0.0
    if socket is not None:
        host_cpu = cpu_seconds(host.pid) - host_began if host is not None else 0.0
        _stop_host(host, socket)
    made = sum(result["made"] for result in results)
    refused = sum(result["refused"] for result in results)
    in_time = sum(result["written_in_time"] for result in results)
    written = sum(result["written"] for result in results)
    writes = sorted(w * 1000 for result in results for w in result["writes"])
    cuts = (
        statistics.quantiles(writes, n=100, method="inclusive") if len(writes) > 1 else [0.0] * 99
    )
    print(
        f"{name:11} {args.processes} workers, {rate:8,.0f} calls/s offered: "
        f"refused {refused:7,} ({refused / made:6.1%}), "
        f"{in_time / args.seconds:8,.0f} rows/s written, "
        f"write p50 {cuts[49]:6.1f} p99 {cuts[98]:6.1f} max {writes[-1] if writes else 0:6.1f} ms, "
        f"longest queue {max(result['peak'] for result in results):6,}, "
        f"CPU µs/row: workers {sum(r['cpu'] for r in results) / in_time * 1e6:5.1f}"
        + (f", host writer {host_cpu / written * 1e6:5.1f}" if socket else "")
        + (
            f", {sum(r['failed'] for r in results)} failed writes"
            if any(r["failed"] for r in results)
            else ""
        ),
        flush=True,
    )
    expected = sum(result["written"] for result in results)
    if expected != made - refused:
        raise RuntimeError(f"{made - refused} admitted, {expected} written")


async def check(store: SqlStore, expected: int) -> None:
    total = await store.count_usage()
    today = datetime.now(UTC).date()
    rolled = 0
    for group in (1, 2):
        rows = await store.daily_usage(group, date(2000, 1, 1), date(today.year + 1, 1, 1))
        rolled += sum(row.requests for row in rows)
    if total != expected or rolled != expected:
        raise RuntimeError(f"{expected} admitted, {total} stored, {rolled} in the rollups")


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (Linux), to count the host writer's share."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_host(url: str) -> tuple[str, subprocess.Popen[bytes] | None]:
    """The host writer, as ``serve --workers`` starts it: its socket and process."""
    host = _host_writer(Settings.model_validate({"database": {"url": url}}), 2)
    assert host is not None
    return host["socket_path"], _start_host({"path": sys.path, "host": host})


async def on_backend(name: str, url: str, schema: str | None, args: argparse.Namespace) -> None:
    store = await open_store(url, schema=schema)
    try:
        await prepare(store)
        writers = args.writer if name == "sqlite" else ["own"]
        for run, rate in enumerate(args.rate):
            for writer in writers:
                label = f"{name}/host" if writer == "host" else name
                await one_run(label, args, url=url, schema=schema, rate=rate, run=f"r{run}{writer}")
        await check(store, await store.count_usage())
    finally:
        await store.close()


async def main(args: argparse.Namespace) -> None:
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as folder:
            await on_backend("sqlite", f"sqlite:///{Path(folder) / 'bench.db'}", None, args)
    if args.backend in ("postgres", "both"):
        import asyncpg

        schema = f"bench_{secrets.token_hex(6)}"
        admin = await asyncpg.connect(args.postgres)
        try:
            await admin.execute(f'CREATE SCHEMA "{schema}"')
            try:
                await on_backend("postgres", args.postgres, schema, args)
            finally:
                await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        finally:
            await admin.close()


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument(
        "--rate", type=float, nargs="+", default=[40_000.0], help="calls/s, all workers"
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--busy", type=int, default=0, metavar="K")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument("--postgres", default=POSTGRES_URL, help="database URL")
    parser.add_argument(
        "--writer",
        choices=("own", "host"),
        nargs="+",
        default=["own", "host"],
        help="SQLite: each worker writes its own usage, or the host writer does",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    parser.add_argument("--tag", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    options = arguments()
    if options.worker:
        options.rate = options.rate[0]
        faulthandler.dump_traceback_later(options.seconds + 60, exit=True)  # a stuck worker
        print(json.dumps(asyncio.run(worker(options))))
    else:
        asyncio.run(main(options))
