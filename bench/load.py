"""Parley under load against the minimal relay it is measured by (DESIGN.md §3).

One command starts everything in separate processes — an instant fake upstream
(``bench.upstream``), the bare aiohttp relay (``bench.bare_relay``), Parley itself
(``python -m parley serve``, one worker, SQLite file database, memory limiter, a key made
with the CLI) — then drives each with ``bench.loadgen`` (a closed loop of N connections)
for a warm-up and a measured window, prints a table and Parley's ratio to the bare relay,
and stops every process and removes its temporary folder, also on Ctrl-C.

    python -m bench.load                                  # from the repo root, ~1.5 minutes
    python -m bench.load --rounds 5 --targets bare,parley # a steadier median
    python -m bench.load --duration 5 --scenarios plain --json /tmp/load.json
    python -m bench.load --targets bare,parley --scenarios messages --rounds 6
    python -m bench.load --targets bare,parley --rounds 6 --before /tmp/old  # A/B

The ``direct`` rows drive the fake upstream with no relay between: the ceiling of this
machine with this generator. The ``messages`` scenario streams ``POST /v1/messages``
through Parley, which translates it onto the same chat upstream and its chat stream into
Anthropic's events; the relays cannot, so it is read against the bare relay's ``stream``.
``--before DIR`` serves a second Parley from another checkout (``git worktree add DIR
COMMIT``) as the target ``before``, on its own database, in the same rounds: a change's
before and after from one machine and hour, each read against the bare relay and against
each other.
See bench/README.md for how to read the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import scale
from bench.harness import drive, parley_location, print_table, smoke_test, stop_and_count
from bench.processes import (
    BenchError,
    Placement,
    Service,
    Services,
    run_in,
    stop,
    wait_until_ready,
)
from parley.heap import ALLOCATORS

TARGETS = ("direct", "bare", "parley")
MODES = ("plain", "stream", "messages")
ONLY_PARLEY = frozenset({"messages"})
"""Scenarios the bare relay cannot run: a streamed Messages call Parley translates onto
the chat upstream, read against the bare relay's chat stream of the same round."""
PARLEYS = ("parley", "before")
"""The targets that are Parley: this checkout's and ``--before``'s."""
GOAL = 0.7


@contextlib.contextmanager
def profiling(directory: Path | None, pid: int, name: str, seconds: float) -> Iterator[None]:
    """py-spy on a Parley process while the block runs into ``directory/name.folded`` (it
    slows Parley down)."""
    if directory is None:
        yield
        return
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        raise BenchError("--profile needs py-spy on the PATH (pip install py-spy)")
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        py_spy, "record", "--pid", str(pid), "--duration", str(math.ceil(seconds)),
        "--rate", "200", "--format", "raw", "--output", str(directory / f"{name}.folded"),
    ]  # fmt: skip
    profiler = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
        profiler.wait(30)
    finally:
        stop(profiler)


def ratios(
    results: list[dict[str, Any]], target: str = "parley", base: str = "bare"
) -> dict[str, dict[str, Any]]:
    """``target``'s ratio to ``base`` in each round, per mode, and their median."""
    rows = {(row["round"], row["target"], row["mode"]): row for row in results}
    rounds = sorted({row["round"] for row in results})
    found: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        throughput, efficiency = [], []
        against = "stream" if mode in ONLY_PARLEY and base not in PARLEYS else mode
        for round_ in rounds:
            bare, parley = rows.get((round_, base, against)), rows.get((round_, target, mode))
            if bare is None or parley is None or not bare["rps"]:
                continue
            bare_cpu = bare["cpu"].get("server", {}).get("us_per_request", math.nan)
            parley_cpu = parley["cpu"].get("server", {}).get("us_per_request", math.nan)
            throughput.append(parley["rps"] / bare["rps"])
            efficiency.append(bare_cpu / parley_cpu if parley_cpu else math.nan)
        if throughput:
            found[mode] = {
                "throughput": statistics.median(throughput),
                "cpu_efficiency": statistics.median(efficiency),
                "throughput_by_round": throughput,
                "cpu_efficiency_by_round": efficiency,
            }
    return found


def print_ratios(
    found: dict[str, dict[str, Any]], target: str = "parley", base: str = "bare"
) -> None:
    """The medians of one ``ratios``; a verdict on the goal for a Parley to the relay."""
    if not found:
        return
    goal = base == "bare"
    names = {"parley": "Parley", "before": "before", "bare": "bare relay"}
    heading = f"{names[target]} / {names[base]}, median of rounds"
    print(f"\n{heading} (goal: throughput ≥ {GOAL} with one worker)" if goal else f"\n{heading}")
    for mode, ratio in found.items():
        verdict = ("meets" if ratio["throughput"] >= GOAL else "BELOW") + " the goal; "
        rounds = " ".join(f"{value:.2f}" for value in ratio["throughput_by_round"])
        if mode in ONLY_PARLEY and goal:
            rounds += "; against the bare relay's stream"
        print(
            f"  {mode:<8} throughput {ratio['throughput']:.2f} ({verdict if goal else ''}"
            f"rounds {rounds})   CPU per request: {base}/{target} {ratio['cpu_efficiency']:.2f}"
        )


def run(args: argparse.Namespace, workdir: Path, place: Placement) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    report: dict[str, Any] = {}
    with Services(workdir) as services:
        upstream_port, bare_port = services.free_port(), services.free_port()
        upstream_args = ["-m", "bench.upstream", "--port", str(upstream_port)]
        if args.upstream_writes == "joined":
            upstream_args.append("--joined")
        upstream = services.start("upstream", upstream_port, upstream_args, cpus=place.helpers)
        upstream_url = f"http://127.0.0.1:{upstream_port}/v1"
        bare_args = ["-m", "bench.bare_relay", "--port", str(bare_port), "--upstream", upstream_url]
        bare = services.start("bare", bare_port, bare_args, cpus=place.servers)
        servers: dict[str, Service] = {"direct": upstream, "bare": bare}
        folders: dict[str, tuple[Path, Path | None]] = {"parley": (workdir, None)}
        if args.before:
            folders["before"] = (workdir / "before", args.before)
        keys: dict[str, str] = {}
        for name, (folder, root) in folders.items():
            servers[name], keys[name] = scale.start_parley(
                services, folder, upstream, workers=1, limits="{backend: memory}",
                place=place, allocator=args.allocator, name=name, root=root,
            )  # fmt: skip
            print(f"{name} package: {parley_location(folder, root)}", flush=True)
        wait_until_ready(upstream)
        wait_until_ready(bare)
        for name in folders:
            wait_until_ready(servers[name], "/health")
        key = keys["parley"]  # the relays take any
        for target in args.targets:
            smoke_test(target, servers[target].port, keys.get(target, key))
        # Rounds interleave the targets, so a slow spell of a shared machine falls on both.
        for round_ in range(1, args.rounds + 1):
            for mode in args.scenarios:
                for target in args.targets:
                    if mode in ONLY_PARLEY and target not in PARLEYS:
                        continue
                    server = servers[target]
                    watch = {"server": server.pid, "upstream": upstream.pid}
                    profile = args.profile if target in PARLEYS and round_ == 1 else None
                    name, seconds = f"{target}-{mode}", args.warmup + args.duration
                    with profiling(profile, server.pid, name, seconds):
                        row = drive(
                            args,
                            target,
                            mode,
                            port=server.port,
                            key=keys.get(target, key),
                            watch=watch,
                            cpus=place.helpers,
                        )
                    row["round"] = round_
                    results.append(row)
                    print(
                        f"  round {round_}  {target:<7}{mode:<9}{row['rps']:>10,.0f} req/s",
                        flush=True,
                    )
        for name, (folder, _) in folders.items():
            if name in args.targets:
                succeeded = sum(r["successes_overall"] for r in results if r["target"] == name)
                count = stop_and_count(services, servers[name], folder, succeeded)
                report["metering" if name == "parley" else f"metering_{name}"] = count
    report |= {"results": results, "ratios": ratios(results)}
    if args.before:
        report["ratios_before"] = ratios(results, "before")
        report["ratios_after_before"] = ratios(results, "parley", "before")
    return report


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="Measured seconds each.")
    parser.add_argument(
        "--rounds", type=int, default=3, help="Runs of every target and mode, interleaved."
    )
    parser.add_argument("--warmup", type=float, default=1.0, help="Unmeasured seconds first.")
    parser.add_argument("--concurrency", type=int, default=64, help="Connections.")
    parser.add_argument(
        "--scenarios",
        default="plain,stream",
        help="plain,stream,messages (messages: Parley only, read against the bare relay's "
        "stream, which then runs too)",
    )
    parser.add_argument("--targets", default=",".join(TARGETS), help="direct,bare,parley")
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="Also serve Parley from the checkout DIR as the target 'before', in the same "
        "rounds: a change's before and after (DIR must import the test extra's packages).",
    )
    parser.add_argument("--client", choices=("raw", "aiohttp"), default="raw")
    parser.add_argument(
        "--upstream-writes",
        choices=("separate", "joined"),
        default="separate",
        help="Stream chunks as separate writes (like an engine) or one write.",
    )
    parser.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="Let the OS place every process (by default the relay under test gets a CPU "
        "of its own, and the upstream and load generator share the others).",
    )
    parser.add_argument(
        "--slow-streams",
        type=int,
        default=0,
        metavar="N",
        help="Instead: hold N slow streams at once through the bare relay and Parley.",
    )
    parser.add_argument(
        "--slow-delay", type=float, default=0.1, help="Seconds between a slow stream's chunks."
    )
    parser.add_argument(
        "--slow-after",
        type=float,
        default=scale.SETTLE_SECONDS,
        metavar="SECONDS",
        help="When the server's memory is read after the slow streams closed ('after').",
    )
    parser.add_argument(
        "--slow-later",
        type=float,
        default=scale.IDLE_SECONDS,
        metavar="SECONDS",
        help="When it is read a last time ('later'; at least --slow-after).",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="Instead: each relay with 1 and with N workers (Parley on the Redis limiter).",
    )
    parser.add_argument(
        "--allocator",
        choices=ALLOCATORS,
        default="auto",
        help="Parley's allocator (`parley serve --allocator`; auto, serve's default, is "
        "jemalloc where installed); the bare relay keeps pymalloc.",
    )
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folder.")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="Record Parley with py-spy into DIR/TARGET-MODE.folded (slows Parley down).",
    )
    args = parser.parse_args()
    args.scenarios = _choices(args.scenarios, MODES, parser)
    if ONLY_PARLEY.intersection(args.scenarios):  # read against the bare relay's stream
        args.scenarios = [mode for mode in MODES if mode in args.scenarios or mode == "stream"]
    args.targets = _choices(args.targets, TARGETS, parser)
    if args.before:
        if not (args.before / "parley" / "__init__.py").is_file():
            parser.error(f"--before {args.before}: no parley package there")
        if args.slow_streams or args.workers:
            parser.error("--before runs with the load rounds, not --slow-streams or --workers")
        args.targets.append("before")
    if args.slow_streams and args.workers:
        parser.error("choose --slow-streams or --workers, not both")
    if not 0 <= args.slow_after <= args.slow_later:
        parser.error("--slow-later must be at least --slow-after, and neither below 0")
    return args


def _choices(value: str, allowed: tuple[str, ...], parser: argparse.ArgumentParser) -> list[str]:
    chosen = [item.strip() for item in value.split(",") if item.strip()]
    unknown = set(chosen) - set(allowed)
    if unknown or not chosen:
        parser.error(f"choose from {','.join(allowed)}, not {value!r}")
    return [item for item in allowed if item in chosen]


def main() -> None:
    args = arguments()
    workdir = Path(tempfile.mkdtemp(prefix="parley-bench-"))
    began = time.monotonic()
    place = Placement.split() if args.pin and not args.workers else Placement()
    print(describe(args, place))
    report = run_in(workdir, args.keep, lambda: measure(args, workdir, place))
    print()
    print_report(args, report)
    print(f"\n(took {time.monotonic() - began:.0f} s; load average {load_average()})")
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "keep", "profile")}
        report["load_average"] = load_average()
        args.json.write_text(json.dumps({"settings": settings, **report}, indent=2, default=str))


def describe(args: argparse.Namespace, place: Placement) -> str:
    if args.slow_streams:
        return (
            f"slow streams: {args.slow_streams} at once, 20 chunks {args.slow_delay:g} s apart, "
            f"{args.rounds} round(s), {place.describe()}"
        )
    workers = f"1 and {args.workers} workers, " if args.workers else ""
    return (
        f"load: {workers}{args.concurrency} connections, {args.warmup:g} s warm-up + "
        f"{args.duration:g} s per run, {args.client} client, upstream stream writes "
        f"{args.upstream_writes}, {place.describe()}"
    )


def measure(args: argparse.Namespace, workdir: Path, place: Placement) -> dict[str, Any]:
    if args.slow_streams:
        return scale.slow_streams(args, workdir, place)
    if args.workers:
        return scale.workers(args, workdir)
    return run(args, workdir, place)


def print_report(args: argparse.Namespace, report: dict[str, Any]) -> None:
    if args.slow_streams:
        scale.print_slow_streams(report)
    elif args.workers:
        scale.print_scaling(report, args.workers)
    else:
        print_table(report["results"])
        print_ratios(report["ratios"])
        if args.before:
            print_ratios(report["ratios_before"], "before")
            print_ratios(report["ratios_after_before"], "parley", "before")
    for name in ("metering", "metering_before"):
        if report.get(name):
            m, whose = report[name], "" if name == "metering" else " (before)"
            print(
                f"\nmetering{whose}: {m['metered']} usage records for {m['succeeded']} "
                "successful calls"
            )


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
