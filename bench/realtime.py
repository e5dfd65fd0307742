"""Realtime sessions through Parley against a bare WebSocket relay: what an open session
holds in memory and what relaying an event costs, with 500 sessions at once.

One command starts an instant fake realtime upstream (``bench.realtime_upstream``: each
``response.create`` answered with ``response.created``, ``rate_limits.updated``, 20 audio
deltas of 100 ms of PCM16 and ``response.done`` with usage), then, in each round, the
bare relay (``bench.bare_ws_relay``) and Parley (``parley serve``, one worker, SQLite,
memory limiter, a priced ``kind: realtime`` model, a group key with generous limits),
each started afresh so that its idle memory is a new process's, and drives each with
``bench.realtime_gen``: N sessions opened and held (memory idle and with them open), then
all doing turns for a measured window (server CPU per relayed event, events/s, turn
latency). It prints a table and Parley's ratios to the bare relay (median of rounds),
checks every turn through Parley was metered, and stops everything, also on Ctrl-C.

    python -m bench.realtime                          # 500 sessions, 3 rounds, 60-80 s
    python -m bench.realtime --sessions 1000 --duration 10 --rounds 5 --json /tmp/rt.json

By default (2 CPUs or more) the relay under test runs alone on the first CPU, the
upstream and the generator on the others (as ``bench.load``). ``ulimit -n`` is raised
toward the sessions' needs (each session costs a relay two sockets).
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import harness
from bench.harness import _number
from bench.processes import (
    BenchError,
    Placement,
    Service,
    Services,
    cpu_list,
    run_in,
    wait_until_ready,
)
from bench.realtime_gen import raise_open_files
from parley.heap import ALLOCATORS

TARGETS = ("bare", "parley")
MODEL = "bench-realtime"
UPSTREAM_MODEL = "fake-realtime"
CONFIG = """\
server: {{host: 127.0.0.1, port: {port}, access_log: false}}
database: {{url: "sqlite:///{workdir}/parley.db"}}
limits: {{backend: memory}}
usage: {{spill_dir: "{workdir}"}}
channels:
  - name: fake
    type: openai
    base_url: http://127.0.0.1:{upstream_port}/v1
    api_key: upstream-key
    models: [{{name: {model}, upstream: {upstream_model}}}]
models:
  - name: {model}
    kind: realtime
    context_window: 32000
    prices:
      input_per_1k: "0.004"
      output_per_1k: "0.016"
      audio_input_per_1k: "0.032"
      audio_output_per_1k: "0.064"
"""
SMOKE_SECONDS = 0.3


def write_config(workdir: Path, port: int, upstream_port: int) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "parley.yaml"
    path.write_text(
        CONFIG.format(
            port=port,
            workdir=workdir,
            upstream_port=upstream_port,
            model=MODEL,
            upstream_model=UPSTREAM_MODEL,
        )
    )
    return path


def start_server(
    services: Services,
    target: str,
    *,
    upstream: Service,
    config: Path,
    port: int,
    place: Placement,
    allocator: str,
) -> Service:
    if target == "bare":
        url = f"http://127.0.0.1:{upstream.port}/v1"
        command = ["-m", "bench.bare_ws_relay", "--port", str(port), "--upstream", url]
        server = services.start("bare", port, command, cpus=place.servers)
        wait_until_ready(server)
    else:
        command = ["-m", "parley", "serve", "--config", str(config), "--workers", "1"]
        command += ["--allocator", allocator]
        server = services.start("parley", port, command, cwd=config.parent, cpus=place.servers)
        wait_until_ready(server, "/health")
    return server


def generate(
    server: Service,
    key: str,
    place: Placement,
    *,
    sessions: int,
    warmup: float,
    duration: float,
    deltas: int,
    compress: bool,
) -> dict[str, Any]:
    """One run of ``bench.realtime_gen`` against ``server``."""
    command = [
        sys.executable, "-m", "bench.realtime_gen",
        "--url", f"ws://127.0.0.1:{server.port}/v1/realtime?model={MODEL}",
        "--key", key,
        "--sessions", str(sessions),
        "--warmup", str(warmup),
        "--duration", str(duration),
        "--deltas", str(deltas),
        "--watch", str(server.pid),
    ]  # fmt: skip
    command += cpu_list(place.helpers) + (["--compress"] if compress else [])
    budget = 120 + warmup + duration + sessions / 20
    done = subprocess.run(command, capture_output=True, text=True, timeout=budget, check=False)
    if done.returncode != 0:
        raise BenchError(f"session generator failed on {server.name}:\n{done.stderr[-2000:]}")
    row: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return row


def run(args: argparse.Namespace, workdir: Path, place: Placement) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    parley_turns = 0
    with Services(workdir) as services:
        upstream_port = services.free_port()
        command = ["-m", "bench.realtime_upstream", "--port", str(upstream_port)]
        command += ["--deltas", str(args.deltas), "--chunk-bytes", str(args.chunk_bytes)]
        upstream = services.start("upstream", upstream_port, command, cpus=place.helpers)
        wait_until_ready(upstream)
        ports = {target: services.free_port() for target in args.targets}
        config = write_config(workdir / "parley", ports.get("parley", 0), upstream_port)
        print(f"parley package: {harness.parley_location(workdir)}", flush=True)
        key = harness.create_key(config)
        # Each round starts every relay afresh (its idle memory a new process's) and runs
        # them one after the other, so a slow spell of a shared machine falls on both.
        for round_ in range(1, args.rounds + 1):
            for target in args.targets:
                server = start_server(
                    services, target, upstream=upstream, config=config, port=ports[target],
                    place=place, allocator=args.allocator,
                )  # fmt: skip
                smoke = generate(
                    server, key, place, sessions=1, warmup=0, duration=SMOKE_SECONDS,
                    deltas=args.deltas, compress=args.compress,
                )  # fmt: skip
                if smoke["errors"] or not smoke["turns_total"]:
                    problem = smoke["first_error"] or "no turn ended"
                    raise BenchError(f"{target}: one session's turns failed: {problem}")
                row = generate(
                    server, key, place, sessions=args.sessions, warmup=args.warmup,
                    duration=args.duration, deltas=args.deltas, compress=args.compress,
                )  # fmt: skip
                row |= {"round": round_, "target": target}
                rows.append(row)
                print(
                    f"  round {round_}  {target:<7}{row['opened']:>5} sessions "
                    f"{row['kb_per_session']:>6,.0f} KB each, {row['events_per_s']:>8,.0f} "
                    f"events/s, {row['us_cpu_per_event']:>5,.1f} µs CPU/event",
                    flush=True,
                )
                code = services.stop(server)
                if target == "parley":
                    parley_turns += smoke["turns_total"] + row["turns_total"]
                    if code != 0:
                        print(f"parley did not stop cleanly:\n{server.log_tail()}")
    metering: dict[str, int] = {}
    if "parley" in args.targets:
        metering = {"turns": parley_turns, **metered(workdir / "parley")}
    return {"results": rows, "ratios": ratios(rows), "metering": metering}


def metered(workdir: Path) -> dict[str, int]:
    """Usage records in Parley's database, and how many of them cost something."""
    with sqlite3.connect(workdir / "parley.db") as db:
        records, priced = db.execute(
            "SELECT count(*), sum(cost_nanos > 0) FROM usage_records"
        ).fetchone()
    return {"metered": int(records), "priced": int(priced or 0)}


RATIOS = {
    "memory per session": ("kb_per_session", "parley ÷ bare"),
    "CPU per event": ("us_cpu_per_event", "parley ÷ bare"),
    "events/s": ("events_per_s", "parley ÷ bare"),
    "turn p50": ("p50_ms", "parley ÷ bare"),
    "turn p99": ("p99_ms", "parley ÷ bare"),
}


def ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Parley's figure ÷ the bare relay's in each round, and their median."""
    by = {(row["round"], row["target"]): row for row in rows}
    found: dict[str, dict[str, Any]] = {}
    for name, (field, _) in RATIOS.items():
        each = []
        for round_ in sorted({row["round"] for row in rows}):
            bare, parley = by.get((round_, "bare")), by.get((round_, "parley"))
            if bare is None or parley is None or not bare[field] or math.isnan(bare[field]):
                continue
            each.append(parley[field] / bare[field])
        if each:
            found[name] = {"median": statistics.median(each), "rounds": each}
    return found


def print_report(report: dict[str, Any]) -> None:
    header = (
        f"{'round':<6}{'target':<8}{'sessions':>9}{'RSS idle':>9}{'open':>7}{'after':>7}"
        f"{'KB/sess':>8}{'events/s':>10}{'turns/s':>9}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'srv CPU':>8}{'µs/event':>9}{'errors':>7}"
    )
    print(header)
    print("-" * len(header))
    for row in report["results"]:
        print(
            f"{row['round']:<6}{row['target']:<8}{row['opened']:>9}"
            f"{_number(row['rss_idle_mb']):>9}{_number(row['rss_open_mb']):>7}"
            f"{_number(row['rss_after_turns_mb']):>7}{_number(row['kb_per_session']):>8}"
            f"{_number(row['events_per_s']):>10}{_number(row['turns_per_s']):>9}"
            f"{_number(row['p50_ms'], 1):>8}{_number(row['p99_ms'], 1):>8}"
            f"{row['srv_cpu_share'] * 100:>7.0f}%{_number(row['us_cpu_per_event'], 1):>9}"
            f"{row['errors']:>7}"
        )
    for row in report["results"]:
        if row["errors"]:
            print(f"first error, {row['target']}: {row['first_error']}")
    print(
        "(RSS in MB: idle, with the sessions open, and after their turns; KB/sess: (open - "
        "idle) ÷ sessions; events both ways in the window; srv CPU: share of one core)"
    )
    if report["ratios"]:
        print("\nParley ÷ bare relay, median of rounds:")
        for name, ratio in report["ratios"].items():
            rounds = " ".join(f"{value:.2f}" for value in ratio["rounds"])
            print(f"  {name:<20}{ratio['median']:>6.2f}   (rounds {rounds})")
    if report["metering"]:
        m = report["metering"]
        print(
            f"\nmetering: {m['metered']} usage records ({m['priced']} priced) "
            f"for {m['turns']} turns through Parley"
        )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=500, help="Sessions open at once.")
    parser.add_argument("--duration", type=float, default=4.0, help="Measured seconds of turns.")
    parser.add_argument("--warmup", type=float, default=1.0, help="Unmeasured seconds first.")
    parser.add_argument("--rounds", type=int, default=3, help="Runs of each relay, interleaved.")
    parser.add_argument("--deltas", type=int, default=20, help="Audio deltas a turn.")
    parser.add_argument(
        "--chunk-bytes", type=int, default=4800, help="Audio bytes a delta (4800: 100 ms)."
    )
    parser.add_argument(
        "--compress",
        action="store_true",
        help="Callers offer permessage-deflate (as browsers and the openai SDK do).",
    )
    parser.add_argument("--targets", default=",".join(TARGETS), help="bare,parley")
    parser.add_argument(
        "--no-pin", dest="pin", action="store_false", help="Let the OS place every process."
    )
    parser.add_argument(
        "--allocator", choices=ALLOCATORS, default="auto", help="Parley's allocator."
    )
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folder.")
    args = parser.parse_args()
    chosen = [item.strip() for item in args.targets.split(",") if item.strip()]
    if not chosen or set(chosen) - set(TARGETS):
        parser.error(f"choose targets from {','.join(TARGETS)}, not {args.targets!r}")
    args.targets = [target for target in TARGETS if target in chosen]
    if args.sessions < 1 or args.rounds < 1 or args.deltas < 1:
        parser.error("--sessions, --rounds and --deltas must be at least 1")
    return args


def main() -> None:
    args = arguments()
    raise_open_files(2 * args.sessions + 1024)  # the servers inherit it
    workdir = Path(tempfile.mkdtemp(prefix="parley-bench-rt-"))
    place = Placement.split() if args.pin else Placement()
    began = time.monotonic()
    print(
        f"realtime: {args.sessions} sessions, {args.deltas} audio deltas of "
        f"{args.chunk_bytes} bytes a turn{', compressed' if args.compress else ''}, "
        f"{args.warmup:g} s warm-up + {args.duration:g} s, "
        f"{args.rounds} round(s), {place.describe()}",
        flush=True,
    )
    report = run_in(workdir, args.keep, lambda: run(args, workdir, place))
    print()
    print_report(report)
    print(f"\n(took {time.monotonic() - began:.0f} s)")
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "keep")}
        args.json.write_text(json.dumps({"settings": settings, **report}, indent=2, default=str))


if __name__ == "__main__":
    main()
