"""What one streamed call costs a relay, counted in instructions: load-robust where
``bench.load``'s CPU figures are not (a shared machine changes the time an instruction
takes, not how many run).

It starts the fake upstream (``bench/upstream.py``) and one relay (Parley, one worker, the
``bench.load`` configuration; or the bare relay) under ``valgrind --tool=callgrind``, warms
the relay up, zeroes the counters, sends ``--streams`` streamed chat calls
(``--concurrency`` at a time) and dumps the counters: instructions per stream are the
total over the streams. By default the upstream writes each chunk ``--delay`` seconds
after the last, so every chunk reaches the relay in a read of its own, the worst case and
what an engine producing tokens does (``--delay 0``: the upstream writes them back to back,
and reads may carry several). Each stream is 20 content chunks, a usage chunk (the calls
ask ``include_usage``) and ``[DONE]``.

    python -m bench.stream_cost                       # Parley and the bare relay (~8 min)
    python -m bench.stream_cost --targets parley --streams 100
    python -m bench.stream_cost --no-valgrind         # CPU time instead (noisy, quick)
    python -m bench.stream_cost --targets bare,bare-parley-client,parley   # the gap, split

``bare-parley-client`` is the bare relay on Parley's own upstream client
(``bench/bare_relay.py --client parley``): against ``bare`` it is what the client saves,
against ``parley`` what the gateway's own work costs (keys, limits, routing, the rewritten
events, metering).

Instructions of the relay process only (valgrind does not follow children); the upstream
and the calls' client run natively in other processes. Callgrind counts each thread apart:
the figure compared is the event loop's thread's, and the count over every thread is
printed beside it. Work done every so many seconds counts as often as valgrind slows the
run down (a run lasts minutes), so Parley writes its usage records by batch size only
(500, more than a run's calls), refreshes its key directory hourly and its batch lane
looks for work hourly. What still runs by the clock (the metrics sampler once a second,
the heap trim, the shared breakers' loops: a fraction of a millisecond a second natively,
but a run under valgrind lasts minutes) is counted apart: after the streams the relay is
left idle as long as they took, and those instructions are taken away from the figures
(``--no-idle`` keeps them in, and the line says what they were).
The defaults (``--delay 0.25``, two streams at a time) keep the events one a
read under valgrind, which slows a relay enough that events 0.02 s apart, four streams
at a time, shared reads (about 2.3 events a read for ``main``, 1.2 for a faster build:
the faster relay then paid for more reads). Each stream's last three events are written
back to back, so a stream is about 20 reads.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from bench.harness import MODEL, PATH, SLOW_MODEL, create_key, write_parley_config
from bench.kernel import cpu_seconds
from bench.loadgen import check_reply, request_body
from bench.processes import (
    REPO,
    BenchError,
    Service,
    clean_environment,
    free_ports,
    stop,
    wait_until_ready,
)
from bench.rawhttp import Connection, request_bytes


def start(command: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as output:
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=clean_environment(),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def send(url: str, key: str, model: str, count: int, concurrency: int) -> int:
    """``count`` streams, ``concurrency`` at a time; the number that failed."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    host, port, request = request_bytes(url, request_body(model, "stream"), headers)
    failures = 0
    left = count

    async def worker() -> None:
        nonlocal left, failures
        connection = Connection(host, port)
        try:
            while left > 0:
                left -= 1
                reply = await connection.post(request)
                if check_reply(reply, "stream") or reply.body.count(b"data: ") != 22:
                    failures += 1
        finally:
            connection.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return failures


HOURLY = "{backend: memory, cache_refresh_seconds: 3600}"
"""The directory and the budgets refreshed hourly, as ``bench.count_calls`` has them: a
refresh is a database query, and under valgrind a run lasts long enough for many."""


def by_batch(config: Path) -> None:
    """Usage records written by batch size only, as ``bench.count_calls`` does: a flush
    every second would count as often as valgrind slows the run down (several hundred
    thousand instructions a stream), so the figure would follow the machine's load."""
    text = config.read_text()
    line = next(line for line in text.splitlines() if line.startswith("usage: {"))
    text = text.replace(line, line.replace("usage: {", "usage: {flush_seconds: 1000, "))
    config.write_text(text + QUIET)


QUIET = "batches: {poll_seconds: 3600}\n"
"""The batch lane looks for work hourly, not every second: each look is a database query
on an executor's thread, which under valgrind runs hundreds of times a run."""


def callgrind_control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], capture_output=True, check=True, timeout=120)


def thread_instructions(directory: Path, pid: int) -> dict[int, int]:
    """The instructions of ``pid``'s last dump, thread by thread (callgrind's
    ``--separate-threads``: one file a thread, ``…-01`` the main thread's, where the event
    loop runs)."""
    dumps = sorted(directory.glob(f"callgrind.out.{pid}.*-*"))
    last = max(int(path.name.split(".")[-1].split("-")[0]) for path in dumps)
    counts: dict[int, int] = {}
    for path in dumps:
        part, thread = path.name.split(".")[-1].split("-")
        if int(part) != last:
            continue
        for line in path.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                counts[int(thread)] = int(line.split()[1])
                break
        else:
            raise BenchError(f"no totals in {path}")
    return counts


def counted(workdir: Path, pid: int, streams: int, idle_seconds: float) -> dict[str, float]:
    """The relay's instructions a stream since the counters were zeroed, on the event
    loop's thread and in all threads, less what it runs idle in ``idle_seconds`` after."""
    callgrind_control("--dump", str(pid))
    threads = thread_instructions(workdir, pid)
    idle: dict[int, int] = {}
    if idle_seconds:  # the same time again with no call: what runs by the clock
        callgrind_control("--zero", str(pid))
        time.sleep(idle_seconds)
        callgrind_control("--dump", str(pid))
        idle = thread_instructions(workdir, pid)
    return {
        "instructions_per_stream": (threads.get(1, 0) - idle.get(1, 0)) / streams,
        "all_threads_per_stream": (sum(threads.values()) - sum(idle.values())) / streams,
        "idle_per_stream": idle.get(1, 0) / streams,
    }


def measure(args: argparse.Namespace, target: str, workdir: Path) -> dict[str, Any]:
    upstream_port, relay_port = free_ports(2)
    model = SLOW_MODEL if args.delay > 0 else MODEL
    upstream_args = ["-m", "bench.upstream", "--port", str(upstream_port)]
    upstream_args += ["--slow-delay", str(args.delay)]
    upstream_log = workdir / f"upstream-{target}.log"
    upstream = start([sys.executable, *upstream_args], upstream_log, REPO)
    relay: subprocess.Popen[bytes] | None = None
    try:
        wait_until_ready(Service("upstream", upstream, upstream_port, upstream_log))
        if target == "parley":
            config = write_parley_config(workdir / target, relay_port, upstream_port, HOURLY)
            by_batch(config)
            key, cwd = create_key(config), config.parent
            relay_args = ["-m", "parley", "serve", "--config", str(config)]
            relay_args += ["--port", str(relay_port)]
            # the interpreter's own allocator, as the bare relay's: serve's default may
            # execute it again on jemalloc, which would leave valgrind
            relay_args += ["--allocator", "pymalloc"]
        else:
            key, cwd = "bare", REPO
            relay_args = ["-m", "bench.bare_relay", "--port", str(relay_port)]
            relay_args += ["--upstream", f"http://127.0.0.1:{upstream_port}/v1"]
            if target == "bare-parley-client":  # the bare relay on Parley's upstream client
                relay_args += ["--client", "parley"]
        command = [sys.executable, *relay_args]
        if args.valgrind:
            out = workdir / "callgrind.out.%p"
            command = [
                "valgrind",
                "--tool=callgrind",
                "--separate-threads=yes",
                f"--callgrind-out-file={out}",
                *command,
            ]
        relay_log = workdir / f"{target}.log"
        relay = start(command, relay_log, cwd)
        health = "/health" if target == "parley" else None  # a GET, not a mere connect: a
        # slow start leaves the port free long enough to connect to one's own socket
        wait_until_ready(Service(target, relay, relay_port, relay_log), health, 900)
        url = f"http://127.0.0.1:{relay_port}{PATH}"
        failed = asyncio.run(send(url, key, model, args.warmup, args.concurrency))
        if args.valgrind:
            callgrind_control("--zero", str(relay.pid))
        cpu_before = cpu_seconds(relay.pid) or 0.0
        began = time.perf_counter()
        failed += asyncio.run(send(url, key, model, args.streams, args.concurrency))
        seconds = time.perf_counter() - began
        cpu = (cpu_seconds(relay.pid) or 0.0) - cpu_before
        result: dict[str, Any] = {
            "target": target,
            "streams": args.streams,
            "failed": failed,
            "seconds": seconds,
            "us_cpu_per_stream": cpu / args.streams * 1e6,
        }
        if args.valgrind:
            result |= counted(workdir, relay.pid, args.streams, seconds if args.idle else 0)
        return result
    finally:
        if relay is not None:
            stop(relay)
        stop(upstream)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--targets", default="bare,parley", help="Of bare, bare-parley-client and parley."
    )
    parser.add_argument("--streams", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--delay", type=float, default=0.25, help="Seconds between the upstream's chunks."
    )
    parser.add_argument("--no-valgrind", dest="valgrind", action="store_false")
    parser.add_argument("--keep", action="store_true", help="Keep the folder (callgrind dumps).")
    parser.add_argument(
        "--no-idle",
        dest="idle",
        action="store_false",
        help="Do not take away what the relay runs idle in the same time.",
    )
    args = parser.parse_args()
    if args.valgrind and shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    workdir = Path(tempfile.mkdtemp(prefix="parley-stream-cost-"))
    print(f"load average {os.getloadavg()[0]:.2f}; folder {workdir}", file=sys.stderr)
    results = []
    try:
        for target in args.targets.split(","):
            result = measure(args, target, workdir)
            results.append(result)
            instructions = result.get("instructions_per_stream")
            print(
                f"{target:<18} {result['streams']} streams, {result['failed']} failed, "
                f"{result['us_cpu_per_stream']:,.0f} µs CPU/stream"
                + (
                    f", {instructions:,.0f} instructions/stream on the event loop's thread"
                    f" ({result['all_threads_per_stream']:,.0f} in all threads;"
                    f" idle in the same time, taken away: {result.get('idle_per_stream', 0):,.0f})"
                    if instructions
                    else ""
                ),
                flush=True,
            )
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    by_target = {row["target"]: row for row in results}
    if "parley" in by_target and args.valgrind:
        parley = by_target["parley"]["instructions_per_stream"]
        for name in ("bare", "bare-parley-client"):
            if name in by_target:
                ratio = by_target[name]["instructions_per_stream"] / parley
                print(f"event loop's instructions per stream, {name} / parley: {ratio:.2f}")


if __name__ == "__main__":
    main()
