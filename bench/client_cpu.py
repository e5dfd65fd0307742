"""CPU per upstream call of Parley's own HTTP client against ``aiohttp.ClientSession``.

Whether owning ``parley/http/`` still pays for itself: both clients make the same whole
chat calls to the fast fake upstream (``bench/upstream.py``, on the other CPUs) from this
process, pinned to the first CPU, and the CPU this process used is divided by the calls.
Rounds alternate the clients, so a slow spell of a shared machine falls on both.

    python -m bench.client_cpu                 # 3 rounds of 20,000 calls each, 32 at a time
    python -m bench.client_cpu --rounds 5 --calls 50000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import orjson
import uvloop

from bench.processes import Placement, Services, free_ports, wait_until_ready
from parley.http import HttpClient, prepare

HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
BODY = orjson.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]})
Call = Callable[[], Awaitable[bytes]]


async def parley_client(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    client = HttpClient()
    request = prepare("POST", url, HEADERS)

    async def call() -> bytes:
        reply = await client.send(request, BODY, connect_timeout=5.0, read_timeout=30.0)
        return await reply.read(64 * 1024 * 1024)

    return call, client.close


async def aiohttp_session(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), auto_decompress=False, cookie_jar=None
    )

    async def call() -> bytes:
        async with session.post(url, data=BODY, headers=HEADERS) as response:
            return await response.read()

    return call, session.close


async def measure(kind: str, url: str, calls: int, concurrency: int) -> tuple[float, float]:
    """µs of this process's CPU per call, and calls per second."""
    make = parley_client if kind == "parley" else aiohttp_session
    call, close = await make(url)

    async def worker(count: int) -> None:
        for _ in range(count):
            await call()

    await asyncio.gather(*(worker(100) for _ in range(concurrency)))  # connections, caches
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(calls // concurrency) for _ in range(concurrency)))
    elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    await close()
    done = calls // concurrency * concurrency
    return used / done * 1e6, done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    options = parser.parse_args()
    place = Placement.split()
    (port,) = free_ports(1)
    with tempfile.TemporaryDirectory() as workdir, Services(Path(workdir)) as services:
        upstream = services.start(
            "upstream", port, ["-m", "bench.upstream", "--port", str(port)], cpus=place.helpers
        )
        wait_until_ready(upstream)
        if place.servers is not None:
            os.sched_setaffinity(0, place.servers)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        figures: dict[str, list[float]] = {"parley": [], "aiohttp": []}
        for round_number in range(1, options.rounds + 1):
            for kind, found in figures.items():
                cpu, rate = uvloop.run(measure(kind, url, options.calls, options.concurrency))
                found.append(cpu)
                print(
                    f"round {round_number}  {kind:8} {cpu:6.1f} µs CPU/call  {rate:7,.0f} calls/s"
                )
    parley, session = (statistics.median(figures[kind]) for kind in ("parley", "aiohttp"))
    print(
        f"median: parley.http {parley:.1f} µs, aiohttp.ClientSession {session:.1f} µs "
        f"({session / parley:.1f} times as much)"
    )


if __name__ == "__main__":
    main()
