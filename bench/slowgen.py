"""Many slow streams at once: N connections opened together, each sending one streamed
chat request to a model the fake upstream streams slowly (20 chunks 0.1 s apart), held
until the stream ends. Prints one JSON object.

It reports how many streams completed (a 200 ending with ``data: [DONE]``), the time to
first byte (request sent → first byte of the reply) and to the last, and, for the
watched server (``--watch PID``: the process and its direct children, i.e. a supervisor
and its workers), the peak and final resident memory and the CPU it used, and the
machine's listen-queue overflows during the run (``/proc/net/netstat``).

    python -m bench.slowgen --url http://127.0.0.1:9002/v1/chat/completions --streams 2000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvloop

from bench.kernel import cpu_seconds, listen_overflows, rss_mb, tree
from bench.loadgen import check_reply, percentile, request_body
from bench.rawhttp import Connection, ProtocolError, request_bytes

SAMPLE_SECONDS = 0.25


@dataclass
class Outcome:
    first_bytes: list[float] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""

    def failed(self, problem: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or problem


async def one_stream(
    host: str, port: int, request: bytes, outcome: Outcome, seconds: float
) -> None:
    connection = Connection(host, port)
    began = time.perf_counter()
    try:
        reply = await asyncio.wait_for(connection.post(request), seconds)
        first = connection.first_byte
    except (ProtocolError, OSError, TimeoutError) as error:
        outcome.failed(f"{type(error).__name__}: {error}")
        return
    finally:
        connection.close()
    problem = check_reply(reply, "stream")
    if problem:
        outcome.failed(problem)
        return
    outcome.first_bytes.append(first - began)
    outcome.totals.append(time.perf_counter() - began)


@dataclass
class Watch:
    """The server's memory (sampled) and CPU over the run."""

    pid: int
    peak_mb: float = 0.0
    cpu_before: float = 0.0

    def pids(self) -> list[int]:
        return tree(self.pid) if self.pid else []

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) or 0.0 for pid in self.pids())

    def rss(self) -> float:
        return sum(rss_mb(pid) or 0.0 for pid in self.pids())

    async def sample(self) -> None:
        while True:
            self.peak_mb = max(self.peak_mb, self.rss())
            await asyncio.sleep(SAMPLE_SECONDS)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {args.key}"}
    host, port, request = request_bytes(args.url, request_body(args.model, "stream"), headers)
    watch = Watch(args.watch)
    outcome = Outcome()
    overflows = listen_overflows()
    watch.cpu_before, rss_before = watch.cpu(), watch.rss()
    sampler = asyncio.create_task(watch.sample())
    began = time.perf_counter()
    streams = [one_stream(host, port, request, outcome, args.timeout) for _ in range(args.streams)]
    await asyncio.gather(*streams)
    elapsed = time.perf_counter() - began
    cpu_used = watch.cpu() - watch.cpu_before
    sampler.cancel()
    overflows_after = listen_overflows()
    first, totals = sorted(outcome.first_bytes), sorted(outcome.totals)
    return {
        "streams": args.streams,
        "completed": len(totals),
        "errors": outcome.errors,
        "first_error": outcome.first_error,
        "ttfb_p50_ms": percentile(first, 0.5) * 1000,
        "ttfb_p99_ms": percentile(first, 0.99) * 1000,
        "ttfb_max_ms": (first[-1] if first else float("nan")) * 1000,
        "total_p50_ms": percentile(totals, 0.5) * 1000,
        "total_p99_ms": percentile(totals, 0.99) * 1000,
        "elapsed_s": elapsed,
        "srv_cpu_s": cpu_used,
        "srv_cpu_share": cpu_used / elapsed if elapsed else float("nan"),
        "rss_before_mb": rss_before,
        "rss_peak_mb": max(watch.peak_mb, watch.rss()),
        "rss_after_mb": watch.rss(),
        "listen_overflows": (
            overflows_after - overflows
            if overflows is not None and overflows_after is not None
            else None
        ),
    }


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", default="bench")
    parser.add_argument("--model", default="bench-slow")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=120.0, help="Per stream, seconds.")
    parser.add_argument("--watch", type=int, default=0, metavar="PID", help="The server.")
    parser.add_argument("--cpus", default="", help="Run on these CPUs only, e.g. 1 (Linux).")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in args.cpus.split(",")})
    print(orjson.dumps(uvloop.run(run(args))).decode())


if __name__ == "__main__":
    main()
