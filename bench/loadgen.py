"""A closed-loop load generator: N connections, each sending its next request as soon as the
last one is done, for a warm-up and then a measured window. Prints one JSON object.

Two clients: ``raw`` (default), a lean HTTP/1.1 keep-alive client on asyncio protocols
(``bench.rawhttp``) that costs the generator a fraction of the CPU, which matters when it
shares two cores with the server under test; and ``aiohttp`` (``aiohttp.ClientSession``),
the ordinary client, to cross-check the raw one.

``--mode`` is ``plain`` or ``stream`` (chat completions) or ``messages`` (a streamed
Anthropic Messages call: point ``--url`` at ``/v1/messages``). Only requests that finish
inside the measured window count. A success is a 200 whose body is complete (a whole
reply mentions ``usage``; a chat stream ends with ``data: [DONE]``, a Messages stream with
its ``message_stop`` event);
anything else (another status, a cut stream, a connection error) is an error. Latency is
from sending the request to reading the last byte of the reply.

With ``--watch NAME=PID`` (Linux), the CPU time each watched process used during the
window is reported, as a share of one core and as microseconds per successful request;
the generator's own CPU share is always reported (near 100 % means it may be the limit).

    python -m bench.loadgen --url http://127.0.0.1:9002/v1/chat/completions --mode stream
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import uvloop

from bench import kernel
from bench.rawhttp import Connection, ProtocolError, Reply, request_bytes

PROMPT = "Say hello to the benchmark in twenty words."
TAIL = 64
MODES = ("plain", "stream", "messages")
ENDINGS: dict[str, bytes] = {
    "stream": b"data: [DONE]",
    "messages": b'data: {"type":"message_stop"}',
}
"""What a complete stream of each streamed mode ends with; a whole reply holds ``usage``."""


@dataclass
class Window:
    starts: float
    ends: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    successes_overall: int = 0
    """Successes in the warm-up and the window and after it (to check metering against)."""

    def record(self, began: float, ok: bool, error: str = "") -> None:
        now = time.perf_counter()
        self.successes_overall += ok
        if not self.starts <= now <= self.ends:
            return
        if ok:
            self.latencies.append(now - began)
            return
        self.errors += 1
        self.first_error = self.first_error or error


def request_body(model: str, mode: str) -> bytes:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 64,
    }
    if mode == "stream":
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    elif mode == "messages":
        body["stream"] = True
    return orjson.dumps(body)


def incomplete(mode: str, body: bytes) -> str:
    """What is missing from a 200's body (the end of a stream's), or "" if it is whole."""
    ending = ENDINGS.get(mode)
    if ending is None:
        return "" if b'"usage"' in body else "reply without usage"
    return "" if body.rstrip().endswith(ending) else f"stream without {ending.decode()}"


async def one_request(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], mode: str
) -> str:
    """Send one request; return "" on success, else what went wrong."""
    async with session.post(url, data=body, headers=headers) as response:
        if mode == "plain":
            data = await response.read()
            if response.status != 200:
                return f"status {response.status}: {data[:200]!r}"
            return incomplete(mode, data)
        tail = b""
        async for piece in response.content.iter_any():
            tail = (tail + piece)[-TAIL:]
        if response.status != 200:
            return f"status {response.status}: {tail!r}"
        return incomplete(mode, tail)


async def connection_loop(
    session: aiohttp.ClientSession,
    *,
    url: str,
    body: bytes,
    headers: dict[str, str],
    mode: str,
    window: Window,
) -> None:
    while time.perf_counter() < window.ends:
        began = time.perf_counter()
        try:
            problem = await one_request(session, url, body, headers, mode)
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            problem = f"{type(error).__name__}: {error}"
        window.record(began, not problem, problem)


def check_reply(reply: Reply, mode: str) -> str:
    """What is wrong with the reply, or nothing ("") if it is a complete success."""
    if reply.status != 200:
        return f"status {reply.status}: {reply.body[:200]!r}"
    return incomplete(mode, reply.body)


async def raw_connection_loop(
    host: str, port: int, request: bytes, mode: str, window: Window
) -> None:
    connection = Connection(host, port)
    try:
        while time.perf_counter() < window.ends:
            began = time.perf_counter()
            try:
                problem = check_reply(await connection.post(request), mode)
            except (ProtocolError, OSError) as error:
                problem = f"{type(error).__name__}: {error}"
                await asyncio.sleep(0.01)
            window.record(began, not problem, problem)
    finally:
        connection.close()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and its direct children (a supervisor and its
    workers), or None if unknown."""
    used = [kernel.cpu_seconds(each) for each in kernel.tree(pid)]
    known = [value for value in used if value is not None]
    return sum(known) if known else None


def rss_each_mb(pid: int) -> list[float]:
    """Resident memory of a process and of each of its direct children, in MB."""
    return [mb for mb in (kernel.rss_mb(each) for each in kernel.tree(pid)) if mb is not None]


def percentile(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    mode: str = args.mode
    body = request_body(args.model, mode)
    headers = {"Content-Type": "application/json"}
    if args.key:
        headers["Authorization"] = f"Bearer {args.key}"
    watched = dict(parse_watch(item) for item in args.watch)
    now = time.perf_counter()
    window = Window(starts=now + args.warmup, ends=now + args.warmup + args.duration)
    connector = aiohttp.TCPConnector(limit=args.concurrency, force_close=False)
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    host, port, request = request_bytes(args.url, body, headers)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        if args.client == "raw":
            coroutines = [
                raw_connection_loop(host, port, request, mode, window)
                for _ in range(args.concurrency)
            ]
        else:
            coroutines = [
                connection_loop(
                    session, url=args.url, body=body, headers=headers, mode=mode, window=window
                )
                for _ in range(args.concurrency)
            ]
        loops = [asyncio.create_task(coroutine) for coroutine in coroutines]
        await asyncio.sleep(max(0.0, window.starts - time.perf_counter()))
        before = {name: cpu_seconds(pid) for name, pid in watched.items()}
        before["machine"] = kernel.machine_busy_seconds()
        own_before = time.process_time()
        await asyncio.sleep(max(0.0, window.ends - time.perf_counter()))
        after = {name: cpu_seconds(pid) for name, pid in watched.items()}
        after["machine"] = kernel.machine_busy_seconds()
        own_after = time.process_time()
        await asyncio.wait(loops, timeout=args.timeout)
        for loop in loops:
            loop.cancel()
    return summary(
        args, window, watched=watched, before=before, after=after, own_cpu=own_after - own_before
    )


def summary(
    args: argparse.Namespace,
    window: Window,
    *,
    watched: dict[str, int],
    before: dict[str, float | None],
    after: dict[str, float | None],
    own_cpu: float,
) -> dict[str, Any]:
    ordered = sorted(window.latencies)
    ok = len(ordered)
    cpu: dict[str, dict[str, float]] = {}
    for name in [*watched, "machine"]:
        start, end = before[name], after[name]
        if start is not None and end is not None:
            used = end - start
            cpu[name] = {
                "share": used / args.duration,
                "us_per_request": used / ok * 1e6 if ok else float("nan"),
            }
    return {
        "mode": args.mode,
        "client": args.client,
        "url": args.url,
        "concurrency": args.concurrency,
        "duration": args.duration,
        "requests": ok,
        "errors": window.errors,
        "successes_overall": window.successes_overall,
        "first_error": window.first_error,
        "rps": ok / args.duration,
        "p50_ms": percentile(ordered, 0.50) * 1000,
        "p99_ms": percentile(ordered, 0.99) * 1000,
        "max_ms": (ordered[-1] if ordered else float("nan")) * 1000,
        "client_cpu_share": own_cpu / args.duration,
        "cpu": cpu,
        "rss_mb": {name: sum(rss_each_mb(pid)) or None for name, pid in watched.items()},
        "rss_each_mb": {name: rss_each_mb(pid) for name, pid in watched.items()},
    }


def parse_watch(item: str) -> tuple[str, int]:
    name, _, pid = item.partition("=")
    return name, int(pid)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--mode", choices=MODES, default="plain")
    parser.add_argument("--key", default="", help="Sent as Authorization: Bearer KEY.")
    parser.add_argument("--model", default="bench-model")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--duration", type=float, default=10.0, help="Measured seconds.")
    parser.add_argument("--warmup", type=float, default=2.0, help="Unmeasured seconds first.")
    parser.add_argument("--timeout", type=float, default=30.0, help="Per request, seconds.")
    parser.add_argument("--client", choices=("raw", "aiohttp"), default="raw")
    parser.add_argument("--watch", action="append", default=[], metavar="NAME=PID")
    parser.add_argument("--cpus", default="", help="Run on these CPUs only, e.g. 1,2 (Linux).")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in args.cpus.split(",")})
    result = uvloop.run(run(args))
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
