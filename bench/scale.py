"""``bench.load``'s two scale modes: many slow streams held at once, and workers.

``--slow-streams N``: the fake upstream streams a slow model (20 chunks, 0.1 s apart);
``bench.slowgen`` opens N connections together, each holding one such stream, against the
bare relay and then Parley (one worker each), and reports completion, time to first byte,
the server's CPU and memory (before, peak, and a few seconds after the streams closed)
and the listen-queue overflows. Then it checks every completed stream was metered.

``--workers N``: the bare relay and Parley each with one worker and with N workers (Parley
with the Redis limiter, the real scale-out setting; N processes share the port under a
supervisor), driven like ``bench.load``'s throughput runs, unpinned; reports each one's
scaling ratio (N workers ÷ one worker) and the memory of every process.

On a machine with few cores the workers share them with the upstream, the generator and
Redis, so the throughput ratio says as much about who got the cores that second as about
the relay. To make it as fair as the cores allow: the order of the four runs is reversed
every other round (bare-1 parley-1 bare-N parley-N, then parley-N bare-N parley-1 bare-1),
so a slow spell weighs on both relays and both worker counts alike; and beside each ratio
the CPU each call cost is printed, per process (the relay's workers, Redis for Parley,
the upstream, the generator), with how many of the machine's cores were busy. Workers
"add up" when a call costs the same CPU with N workers as with one: that figure does not
depend on who else used the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import harness
from bench.kernel import listen_backlog, rss_mb, tree
from bench.processes import (
    BenchError,
    Placement,
    Service,
    Services,
    cpu_list,
    wait_until_ready,
)

SETTLE_SECONDS = 12.0
"""By default (``--slow-after``), after the streams closed, before the server's memory is
read again (Parley gives freed memory back every 10 s: parley/heap.py)."""
IDLE_SECONDS = 30.0
"""By default (``--slow-later``), when it is read a last time: past the upstream client's
15 s keep-alive, after which Parley has closed the burst's idle upstream connections
(parley/http/pool.py)."""
REDIS_LIMITS = "{backend: redis}"
REDIS_URL = "redis://127.0.0.1:6379/0"
"""The Redis Parley's limiter uses in this mode (the configuration's default)."""


def redis_pid() -> int | None:
    """The Redis server's process, to count its CPU in Parley's cost per call."""
    try:
        import redis

        info = redis.Redis.from_url(REDIS_URL, socket_timeout=2).info("server")
    except Exception:  # any failure: only this figure is lost
        return None
    pid = info.get("process_id")
    return int(pid) if pid else None


def start_upstream(services: Services, args: argparse.Namespace, place: Placement) -> Service:
    port = services.free_port()
    command = ["-m", "bench.upstream", "--port", str(port), "--slow-delay", str(args.slow_delay)]
    return services.start("upstream", port, command, cpus=place.helpers)


def start_bare(
    services: Services, upstream: Service, workers: int, place: Placement, name: str = "bare"
) -> Service:
    port = services.free_port()
    url = f"http://127.0.0.1:{upstream.port}/v1"
    command = ["-m", "bench.bare_relay", "--port", str(port), "--upstream", url]
    command += ["--workers", str(workers)]
    return services.start(name, port, command, cpus=place.servers)


def start_parley(
    services: Services,
    workdir: Path,
    upstream: Service,
    *,
    workers: int,
    limits: str,
    place: Placement,
    allocator: str,
    name: str = "parley",
    root: Path | None = None,
) -> tuple[Service, str]:
    """Parley in its own folder (config, database), and a key to call it with; from the
    checkout ``root`` when given (``bench.load --before``), else the one Python finds."""
    port = services.free_port()
    config = harness.write_parley_config(workdir, port, upstream.port, limits)
    key = harness.create_key(config, root)
    command = ["-m", "parley", "serve", "--config", str(config), "--workers", str(workers)]
    command += ["--allocator", allocator]
    environment = harness.checkout_environment(root)
    parley = services.start(name, port, command, cwd=workdir, cpus=place.servers, env=environment)
    return parley, key


def slow_streams(args: argparse.Namespace, workdir: Path, place: Placement) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with Services(workdir) as services:
        upstream = start_upstream(services, args, place)
        bare = start_bare(services, upstream, 1, place)
        parley, key = start_parley(
            services, workdir / "parley", upstream, workers=1, limits="{backend: memory}",
            place=place, allocator=args.allocator,
        )  # fmt: skip
        for service, path in ((upstream, None), (bare, None), (parley, "/health")):
            wait_until_ready(service, path)
        servers = {"bare": bare, "parley": parley}
        for target in ("bare", "parley"):
            harness.smoke_test(target, servers[target].port, key)
        for round_ in range(1, args.rounds + 1):
            for target, server in servers.items():
                row = hold_streams(args, server, key, place)
                row |= {"round": round_, "target": target}
                rows.append(row)
                print(
                    f"  round {round_}  {target:<7}{row['completed']:>7} of {row['streams']} "
                    f"completed, time to first byte p99 {row['ttfb_p99_ms']:,.0f} ms",
                    flush=True,
                )
        completed = sum(row["completed"] for row in rows if row["target"] == "parley")
        metering = harness.stop_and_count(services, parley, workdir / "parley", completed)
    return {
        "slow_streams": rows,
        "memory_read_s": {"after": args.slow_after, "later": args.slow_later},
        "metering": metering,
    }


def hold_streams(
    args: argparse.Namespace, server: Service, key: str, place: Placement
) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "bench.slowgen",
        "--url", f"http://127.0.0.1:{server.port}{harness.PATH}",
        "--key", key,
        "--model", harness.SLOW_MODEL,
        "--streams", str(args.slow_streams),
        "--watch", str(server.pid),
    ]  # fmt: skip
    command += cpu_list(place.helpers)
    budget = 120 + args.slow_streams / 50
    done = subprocess.run(command, capture_output=True, text=True, timeout=budget, check=False)
    if done.returncode != 0:
        raise BenchError(f"slow-stream generator failed on {server.name}:\n{done.stderr[-2000:]}")
    row: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    time.sleep(args.slow_after)
    row["rss_settled_mb"] = sum(rss_mb(pid) or 0.0 for pid in tree(server.pid))
    time.sleep(args.slow_later - args.slow_after)
    row["rss_idle_mb"] = sum(rss_mb(pid) or 0.0 for pid in tree(server.pid))
    row["backlog"] = listen_backlog(server.port)
    return row


def print_slow_streams(report: dict[str, Any]) -> None:
    header = (
        f"{'round':<6}{'target':<8}{'streams':>8}{'done':>7}{'errors':>7}{'ttfb p50':>10}"
        f"{'ttfb p99':>10}{'ttfb max':>10}{'last p99':>10}{'srv CPU':>9}{'RSS before':>11}"
        f"{'peak':>7}{'after':>7}{'later':>7}{'overflows':>10}{'backlog':>8}"
    )
    print(header)
    print("-" * len(header))
    for row in report["slow_streams"]:
        print(
            f"{row['round']:<6}{row['target']:<8}{row['streams']:>8}{row['completed']:>7}"
            f"{row['errors']:>7}{harness._number(row['ttfb_p50_ms']):>10}"
            f"{harness._number(row['ttfb_p99_ms']):>10}{harness._number(row['ttfb_max_ms']):>10}"
            f"{harness._number(row['total_p99_ms']):>10}{harness._share(row['srv_cpu_share']):>9}"
            f"{harness._number(row['rss_before_mb']):>11}{harness._number(row['rss_peak_mb']):>7}"
            f"{harness._number(row['rss_settled_mb']):>7}{harness._number(row['rss_idle_mb']):>7}"
            f"{_maybe(row['listen_overflows']):>10}"
            f"{_maybe(row['backlog']):>8}"
        )
    for row in report["slow_streams"]:
        if row["errors"]:
            print(f"first error, {row['target']}: {row['first_error']}")
    read = report["memory_read_s"]
    print(
        "(ms; ttfb: request sent → first byte; last: → the stream's end; srv CPU: share of "
        "one core over the run; RSS in MB: before, peak, "
        f"{read['after']:g} s (after) and {read['later']:g} s (later) after the streams closed; "
        "overflows: machine-wide)"
    )


def _maybe(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def workers(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Each relay with one worker and with N, interleaved in rounds; unpinned."""
    place = Placement()
    rows: list[dict[str, Any]] = []
    with Services(workdir) as services:
        upstream = start_upstream(services, args, place)
        servers: dict[str, tuple[Service, str]] = {}
        for count in sorted({1, args.workers}):
            servers[f"bare-{count}"] = (
                start_bare(services, upstream, count, place, f"bare-{count}"),
                "",
            )
            servers[f"parley-{count}"] = start_parley(
                services, workdir / f"parley-{count}", upstream, workers=count,
                limits=REDIS_LIMITS, place=place, allocator=args.allocator,
                name=f"parley-{count}",
            )  # fmt: skip
        wait_until_ready(upstream)
        for service, _ in servers.values():
            wait_until_ready(service, "/health" if service.name.startswith("parley") else None)
        keys = {name: key for name, (_, key) in servers.items()}
        key_for_bare = next(key for key in keys.values() if key)
        for name, (service, key) in servers.items():
            harness.smoke_test(name, service.port, key or key_for_bare)
        redis = redis_pid()
        for round_ in range(1, args.rounds + 1):
            order = list(servers.items())
            if round_ % 2 == 0:
                order.reverse()  # ABBA: a drift in the machine's load weighs on all alike
            for mode in args.scenarios:
                for name, (service, key) in order:
                    watch = {"server": service.pid, "upstream": upstream.pid}
                    if redis is not None and name.startswith("parley"):
                        watch["redis"] = redis
                    row = harness.drive(
                        args, name, mode, port=service.port, key=key or key_for_bare,
                        watch=watch, cpus=None,
                    )  # fmt: skip
                    row["round"] = round_
                    rows.append(row)
                    print(f"  round {round_}  {name:<10}{mode:<7}{row['rps']:>10,.0f} req/s")
    return {
        "results": rows,
        "scaling": scaling(rows, args.workers),
        "cpu_per_call": cpu_per_call(rows),
    }


def scaling(rows: list[dict[str, Any]], count: int) -> dict[str, dict[str, float]]:
    """Per relay and mode: the median over rounds of (N workers' req/s ÷ one worker's)."""
    found: dict[str, dict[str, float]] = {}
    by = {(row["round"], row["target"], row["mode"]): row["rps"] for row in rows}
    for relay in ("bare", "parley"):
        for mode in {row["mode"] for row in rows}:
            ratios = [
                by[(r, f"{relay}-{count}", mode)] / by[(r, f"{relay}-1", mode)]
                for r in {row["round"] for row in rows}
                if by.get((r, f"{relay}-1", mode))
            ]
            if ratios:
                found.setdefault(relay, {})[mode] = statistics.median(ratios)
    return found


PROCESSES = ("server", "redis", "upstream")


def cpu_per_call(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per target and mode: the median over rounds of each process's µs of CPU per
    call (the generator's too), their total, and the machine's busy cores."""
    found: dict[str, dict[str, dict[str, float]]] = {}
    for target in dict.fromkeys(row["target"] for row in rows):
        for mode in dict.fromkeys(row["mode"] for row in rows):
            mine = [row for row in rows if row["target"] == target and row["mode"] == mode]
            figures: dict[str, list[float]] = {}
            for row in mine:
                each = {
                    name: row["cpu"][name]["us_per_request"]
                    for name in PROCESSES
                    if name in row["cpu"]
                }
                if row["rps"]:
                    each["client"] = row["client_cpu_share"] * 1e6 / row["rps"]
                each["total"] = sum(each.values())
                each["busy cores"] = row["cpu"].get("machine", {}).get("share", float("nan"))
                for name, value in each.items():
                    figures.setdefault(name, []).append(value)
            if figures:
                found.setdefault(target, {})[mode] = {
                    name: statistics.median(values) for name, values in figures.items()
                }
    return found


def print_cpu_per_call(report: dict[str, Any], count: int) -> None:
    found = report["cpu_per_call"]
    print("\nµs of CPU per call, median of rounds (server = all its workers):")
    print(
        f"  {'target':<10}{'mode':<8}{'server':>8}{'redis':>8}{'upstr':>8}{'client':>8}"
        f"{'total':>8}{'busy cores':>12}"
    )
    for target, modes in found.items():
        for mode, each in modes.items():
            cells = "".join(
                f"{harness._number(each.get(name)):>8}"
                for name in ("server", "redis", "upstream", "client", "total")
            )
            print(f"  {target:<10}{mode:<8}{cells}{each['busy cores']:>12.2f}")
    print(f"\nCPU per call, 1 worker ÷ {count} workers (1.00: a call costs no more with more):")
    for relay in ("bare", "parley"):
        for mode in found.get(f"{relay}-1", {}):
            one = found[f"{relay}-1"][mode]
            many = found.get(f"{relay}-{count}", {}).get(mode)
            if many:
                print(
                    f"  {relay:<7}{mode:<7} server {one['server'] / many['server']:.2f}"
                    f"   all processes {one['total'] / many['total']:.2f}"
                )


def print_scaling(report: dict[str, Any], count: int) -> None:
    harness.print_table(report["results"])
    print("\nRSS per process, MB (supervisor first), at the end of each row's run:")
    last = {(row["target"]): row for row in report["results"]}
    for name, row in last.items():
        each = row["rss_each_mb"].get("server", [])
        print(f"  {name:<10}" + " + ".join(f"{mb:.0f}" for mb in each) + f" = {sum(each):.0f}")
    print(f"\nscaling, {count} workers ÷ 1 worker (median of rounds):")
    found = report["scaling"]
    for mode in sorted({m for modes in found.values() for m in modes}):
        bare, parley = found.get("bare", {}).get(mode), found.get("parley", {}).get(mode)
        line = f"  {mode:<7} bare {bare:.2f}   parley {parley:.2f}" if bare and parley else ""
        if bare and parley:
            line += f"   parley's ÷ bare's {parley / bare:.2f} (goal ≥ 0.90)"
        print(line or f"  {mode:<7} incomplete")
    rounds = sorted({row["round"] for row in report["results"]})
    by = {(r["round"], r["target"], r["mode"]): r["rps"] for r in report["results"]}
    for mode in sorted({row["mode"] for row in report["results"]}):
        for relay in ("bare", "parley"):
            each = [
                by[(r, f"{relay}-{count}", mode)] / by[(r, f"{relay}-1", mode)]
                for r in rounds
                if by.get((r, f"{relay}-1", mode)) and (r, f"{relay}-{count}", mode) in by
            ]
            print(f"  {mode:<7} {relay:<7} rounds: " + " ".join(f"{x:.2f}" for x in each))
    print_cpu_per_call(report, count)
