"""Many realtime sessions at once against one relay, in one process: opened, held idle,
then all doing turns for a while. Prints one JSON object.

1. The watched server's resident memory (``--watch PID``) is read, ``--sessions``
   WebSockets are opened (``--open-at-once`` handshakes at a time), each must begin with
   ``session.created`` (``--compress``: each offers permessage-deflate, as browsers and
   the ``websockets`` library behind the ``openai`` SDK do); after ``--settle`` seconds
   the memory is read again: the difference over the sessions is what a session holds.
2. Every session does turns in a closed loop (``response.create``, then every event up
   to its ``response.done``, which must bring ``--deltas`` audio deltas): ``--warmup``
   seconds unmeasured, then ``--duration`` measured. In the window: the server's CPU
   time (``/proc/PID/stat``), the events relayed both ways (caller's ``response.create``
   and every event the caller got), and each turn's latency (``response.create`` sent →
   ``response.done`` read) for the turns that ended in it.
3. No session starts a turn after the window; each finishes the one it is in, the
   memory is read a third time (sessions open, a few turns behind them) and every
   session is closed. ``turns_total`` counts every turn that ended, warm-up included
   (what a metering relay must have recorded).

    python -m bench.realtime_gen --url ws://127.0.0.1:9102/v1/realtime?model=m --sessions 500
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import uvloop

from bench.kernel import cpu_seconds, rss_mb
from bench.loadgen import percentile

CREATE = orjson.dumps({"type": "response.create"}).decode()
DELTA = '"response.output_audio.delta"'
DONE = '"response.done"'
CREATED = '"session.created"'
TURN_SECONDS = 60.0
"""A turn that takes longer is an error (the relay stalled), not a figure."""


def raise_open_files(wanted: int) -> None:
    """Raise the soft ``ulimit -n`` toward ``wanted`` (at most the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


@dataclass
class Window:
    """What the measured window saw."""

    measuring: bool = False
    stopping: bool = False
    events: int = 0
    turns: int = 0
    latencies: list[float] = field(default_factory=list)


@dataclass
class Outcome:
    turns_total: int = 0
    errors: int = 0
    first_error: str = ""

    def failed(self, problem: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or problem


async def open_session(
    client: aiohttp.ClientSession, args: argparse.Namespace, gate: asyncio.Semaphore
) -> aiohttp.ClientWebSocketResponse:
    async with gate:
        socket = await client.ws_connect(
            args.url,
            headers={"Authorization": f"Bearer {args.key}"},
            protocols=("realtime",),
            max_msg_size=16 * 1024 * 1024,
            autoping=True,
            compress=15 if args.compress else 0,
        )
        first = await socket.receive(timeout=30)
        if first.type != aiohttp.WSMsgType.TEXT or CREATED not in first.data[:40]:
            await socket.close()
            raise ConnectionError(f"the session did not begin with session.created: {first!r}")
        return socket


async def do_turns(
    socket: aiohttp.ClientWebSocketResponse, deltas: int, window: Window, outcome: Outcome
) -> None:
    """Turns in a closed loop until the window has ended."""
    while not window.stopping:
        began = time.perf_counter()
        await socket.send_str(CREATE)
        window.events += window.measuring
        audio = 0
        while True:
            message = await socket.receive(timeout=TURN_SECONDS)
            if message.type != aiohttp.WSMsgType.TEXT:
                outcome.failed(f"the session ended in a turn: {message.type!r} {message.extra!r}")
                return
            window.events += window.measuring
            head = message.data[:40]
            if DELTA in head:
                audio += 1
            elif DONE in head:
                break
        if window.measuring:
            window.turns += 1
            window.latencies.append(time.perf_counter() - began)
        outcome.turns_total += 1
        if audio != deltas:
            outcome.failed(f"a turn brought {audio} audio deltas, not {deltas}")
            return


def server_rss(pid: int) -> float:
    return rss_mb(pid) or float("nan")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    outcome, window = Outcome(), Window()
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as client:
        rss_idle = server_rss(args.watch)
        gate = asyncio.Semaphore(args.open_at_once)
        began = time.perf_counter()
        opened = await asyncio.gather(
            *(open_session(client, args, gate) for _ in range(args.sessions)),
            return_exceptions=True,
        )
        open_seconds = time.perf_counter() - began
        sockets = [s for s in opened if isinstance(s, aiohttp.ClientWebSocketResponse)]
        for failure in opened:
            if isinstance(failure, BaseException):
                outcome.failed(f"opening a session: {type(failure).__name__}: {failure}")
        await asyncio.sleep(args.settle)
        rss_open = server_rss(args.watch)
        turning = [
            asyncio.create_task(do_turns(socket, args.deltas, window, outcome))
            for socket in sockets
        ]
        await asyncio.sleep(args.warmup)
        cpu_before, start = cpu_seconds(args.watch) or 0.0, time.perf_counter()
        window.measuring = True
        await asyncio.sleep(args.duration)
        window.measuring = False
        cpu_after, elapsed = cpu_seconds(args.watch) or 0.0, time.perf_counter() - start
        window.stopping = True
        for result in await asyncio.gather(*turning, return_exceptions=True):
            if isinstance(result, BaseException):
                outcome.failed(f"in a turn: {type(result).__name__}: {result}")
        rss_after = server_rss(args.watch)
        await asyncio.gather(*(socket.close() for socket in sockets), return_exceptions=True)
    cpu = cpu_after - cpu_before
    ordered = sorted(window.latencies)
    return {
        "sessions": args.sessions,
        "opened": len(sockets),
        "open_seconds": open_seconds,
        "rss_idle_mb": rss_idle,
        "rss_open_mb": rss_open,
        "rss_after_turns_mb": rss_after,
        "kb_per_session": (rss_open - rss_idle) * 1024 / max(len(sockets), 1),
        "events": window.events,
        "events_per_s": window.events / elapsed,
        "turns": window.turns,
        "turns_per_s": window.turns / elapsed,
        "turns_total": outcome.turns_total,
        "p50_ms": percentile(ordered, 0.50) * 1000,
        "p99_ms": percentile(ordered, 0.99) * 1000,
        "srv_cpu_share": cpu / elapsed,
        "us_cpu_per_event": cpu * 1e6 / window.events if window.events else float("nan"),
        "errors": outcome.errors,
        "first_error": outcome.first_error,
    }


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="ws://host:port/v1/realtime?model=…")
    parser.add_argument("--key", default="none")
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--open-at-once", type=int, default=64, help="Handshakes at a time.")
    parser.add_argument("--settle", type=float, default=1.0, help="Seconds before memory.")
    parser.add_argument("--warmup", type=float, default=1.0, help="Unmeasured seconds of turns.")
    parser.add_argument("--duration", type=float, default=5.0, help="Measured seconds.")
    parser.add_argument("--deltas", type=int, default=20, help="Audio deltas a turn brings.")
    parser.add_argument(
        "--compress",
        action="store_true",
        help="Offer permessage-deflate, as browsers and the `websockets` library do.",
    )
    parser.add_argument("--watch", type=int, required=True, help="The server's process id.")
    parser.add_argument("--cpus", default="", help="Run on these CPUs only, e.g. 1 (Linux).")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in args.cpus.split(",")})
    raise_open_files(args.sessions + 1024)
    result = uvloop.run(run(args))
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
