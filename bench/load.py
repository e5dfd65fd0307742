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

The ``direct`` rows drive the fake upstream with no relay between: the ceiling of this
machine with this generator. See bench/README.md for how to read the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.processes import (
    BenchError,
    Placement,
    Service,
    Services,
    clean_environment,
    cpu_list,
    free_ports,
    sigterm_as_interrupt,
    stop,
    wait_until_ready,
)

TARGETS = ("direct", "bare", "parley")
MODES = ("plain", "stream")
MODEL = "bench-model"
GOAL = 0.7
PATH = "/v1/chat/completions"
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
    models: [{{name: {model}, upstream: fake-model}}]
models:
  - name: {model}
    kind: chat
    context_window: 32768
    prices: {{input_per_1k: 0.0005, output_per_1k: 0.0015}}
"""


def write_parley_config(workdir: Path, port: int, upstream_port: int) -> Path:
    path = workdir / "parley.yaml"
    text = CONFIG.format(port=port, workdir=workdir, upstream_port=upstream_port, model=MODEL)
    path.write_text(text)
    return path


def parley_cli(config: Path, *args: str) -> str:
    command = [sys.executable, "-m", "parley", "--config", str(config), *args]
    done = subprocess.run(
        command,
        cwd=config.parent,
        env=clean_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"`parley {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout.strip()


def parley_location(workdir: Path) -> str:
    """Where the ``parley`` package that will be served is imported from."""
    done = subprocess.run(
        [sys.executable, "-c", "import parley, os; print(os.path.dirname(parley.__file__))"],
        cwd=workdir,
        env=clean_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or f"unknown ({done.stderr.strip()[-200:]})"


def create_key(config: Path) -> str:
    parley_cli(config, "groups", "create", "bench", "--rpm", "100000000", "--tpm", "1000000000")
    return parley_cli(config, "keys", "create", "--group", "bench", "--name", "load")


def smoke_test(name: str, port: int, key: str) -> None:
    """One whole and one streamed call must work before any load is sent."""
    for stream in (False, True):
        body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
            connection.request("POST", PATH, json.dumps(body), headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        problem = _smoke_problem(response.status, data, stream)
        if problem:
            raise BenchError(f"{name}: {'streamed' if stream else 'whole'} reply {problem}")


def _smoke_problem(status: int, data: bytes, stream: bool) -> str:
    if status != 200:
        return f"has status {status}: {data[:300]!r}"
    if not stream:
        return "" if json.loads(data).get("usage") else "has no usage"
    events = [line for line in data.split(b"\n") if line.startswith(b"data: ")]
    if len(events) != 22 or events[-1] != b"data: [DONE]" or b'"usage"' not in events[-2]:
        return f"is not 20 chunks + usage + [DONE] ({len(events)} events)"
    return ""


def drive(
    args: argparse.Namespace,
    target: str,
    mode: str,
    *,
    port: int,
    key: str,
    watch: dict[str, int],
    cpus: frozenset[int] | None,
) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "bench.loadgen",
        "--url", f"http://127.0.0.1:{port}{PATH}",
        "--mode", mode,
        "--key", key,
        "--model", MODEL,
        "--client", args.client,
        "--concurrency", str(args.concurrency),
        "--duration", str(args.duration),
        "--warmup", str(args.warmup),
    ]  # fmt: skip
    command += [f"--watch={name}={pid}" for name, pid in watch.items()]
    budget = args.warmup + args.duration + 60
    command += cpu_list(cpus)
    done = subprocess.run(command, capture_output=True, text=True, timeout=budget, check=False)
    if done.returncode != 0:
        raise BenchError(f"load generator failed on {target} {mode}:\n{done.stderr[-2000:]}")
    return {"target": target, **json.loads(done.stdout.splitlines()[-1])}


@contextlib.contextmanager
def profiling(directory: Path | None, pid: int, mode: str, seconds: float) -> Iterator[None]:
    """py-spy on the Parley process while the block runs (it slows Parley down)."""
    if directory is None:
        yield
        return
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        raise BenchError("--profile needs py-spy on the PATH (pip install py-spy)")
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        py_spy, "record", "--pid", str(pid), "--duration", str(math.ceil(seconds)),
        "--rate", "200", "--format", "raw", "--output", str(directory / f"parley-{mode}.folded"),
    ]  # fmt: skip
    profiler = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
        profiler.wait(30)
    finally:
        stop(profiler)


def metered_records(workdir: Path) -> int:
    with sqlite3.connect(workdir / "parley.db") as db:
        return int(db.execute("SELECT count(*) FROM usage_records").fetchone()[0])


def _number(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def print_table(results: list[dict[str, Any]]) -> None:
    header = (
        f"{'round':<6}{'target':<8}{'mode':<8}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
        f"{'srv CPU':>9}{'µs CPU/req':>12}{'upstr CPU':>11}{'client CPU':>12}{'srv RSS MB':>12}"
    )
    print(header)
    print("-" * len(header))
    for row in results:
        server = row["cpu"].get("server", {})
        upstream = row["cpu"].get("upstream", {}) if row["target"] != "direct" else {}
        print(
            f"{row['round']:<6}{row['target']:<8}{row['mode']:<8}{_number(row['rps']):>9}"
            f"{_number(row['p50_ms'], 1):>9}{_number(row['p99_ms'], 1):>9}{row['errors']:>8}"
            f"{_share(server.get('share')):>9}{_number(server.get('us_per_request')):>12}"
            f"{_share(upstream.get('share')):>11}{_share(row['client_cpu_share']):>12}"
            f"{_number(row['rss_mb'].get('server'), 0):>12}"
        )
    for row in results:
        if row["errors"]:
            print(f"first error, {row['target']} {row['mode']}: {row['first_error']}")


def ratios(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Parley's ratio to the bare relay in each round, per mode, and their median."""
    rows = {(row["round"], row["target"], row["mode"]): row for row in results}
    rounds = sorted({row["round"] for row in results})
    found: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        throughput, efficiency = [], []
        for round_ in rounds:
            bare, parley = rows.get((round_, "bare", mode)), rows.get((round_, "parley", mode))
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


def print_ratios(found: dict[str, dict[str, Any]]) -> None:
    if not found:
        return
    print(f"\nParley / bare relay, median of rounds (goal: throughput ≥ {GOAL} with one worker)")
    for mode, ratio in found.items():
        verdict = "meets" if ratio["throughput"] >= GOAL else "BELOW"
        rounds = " ".join(f"{value:.2f}" for value in ratio["throughput_by_round"])
        print(
            f"  {mode:<7} throughput {ratio['throughput']:.2f} ({verdict} the goal; "
            f"rounds {rounds})   CPU per request: bare/parley {ratio['cpu_efficiency']:.2f}"
        )


def run(args: argparse.Namespace, workdir: Path, place: Placement) -> dict[str, Any]:
    upstream_port, bare_port, parley_port = free_ports(3)
    results: list[dict[str, Any]] = []
    metering: dict[str, int] = {}
    with Services(workdir) as services:
        upstream_args = ["-m", "bench.upstream", "--port", str(upstream_port)]
        if args.upstream_writes == "joined":
            upstream_args.append("--joined")
        upstream = services.start("upstream", upstream_port, upstream_args, cpus=place.helpers)
        upstream_url = f"http://127.0.0.1:{upstream_port}/v1"
        bare_args = ["-m", "bench.bare_relay", "--port", str(bare_port), "--upstream", upstream_url]
        bare = services.start("bare", bare_port, bare_args, cpus=place.servers)
        config = write_parley_config(workdir, parley_port, upstream_port)
        print(f"parley package: {parley_location(workdir)}", flush=True)
        key = create_key(config)
        serve_args = ["-m", "parley", "serve", "--config", str(config), "--port", str(parley_port)]
        parley = services.start("parley", parley_port, serve_args, cwd=workdir, cpus=place.servers)
        wait_until_ready(upstream)
        wait_until_ready(bare)
        wait_until_ready(parley, "/health")
        servers: dict[str, Service] = {"direct": upstream, "bare": bare, "parley": parley}
        for target in args.targets:
            smoke_test(target, servers[target].port, key)
        # Rounds interleave the targets, so a slow spell of a shared machine falls on both.
        for round_ in range(1, args.rounds + 1):
            for mode in args.scenarios:
                for target in args.targets:
                    server = servers[target]
                    watch = {"server": server.pid, "upstream": upstream.pid}
                    profile = args.profile if target == "parley" and round_ == 1 else None
                    with profiling(profile, server.pid, mode, args.warmup + args.duration):
                        row = drive(
                            args,
                            target,
                            mode,
                            port=server.port,
                            key=key,
                            watch=watch,
                            cpus=place.helpers,
                        )
                    row["round"] = round_
                    results.append(row)
                    print(
                        f"  round {round_}  {target:<7}{mode:<7}{row['rps']:>10,.0f} req/s",
                        flush=True,
                    )
        if "parley" in args.targets:
            expected = 2 + sum(r["successes_overall"] for r in results if r["target"] == "parley")
            if services.stop(parley) != 0:
                print(f"parley did not stop cleanly:\n{parley.log_tail()}")
            metering = {"succeeded": expected, "metered": metered_records(workdir)}
    return {"results": results, "ratios": ratios(results), "metering": metering}


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="Measured seconds each.")
    parser.add_argument(
        "--rounds", type=int, default=3, help="Runs of every target and mode, interleaved."
    )
    parser.add_argument("--warmup", type=float, default=1.0, help="Unmeasured seconds first.")
    parser.add_argument("--concurrency", type=int, default=64, help="Connections.")
    parser.add_argument("--scenarios", default="plain,stream", help="plain,stream")
    parser.add_argument("--targets", default=",".join(TARGETS), help="direct,bare,parley")
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
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    parser.add_argument("--keep", action="store_true", help="Keep the temporary folder.")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="Record Parley with py-spy into DIR/parley-MODE.folded (slows Parley down).",
    )
    args = parser.parse_args()
    args.scenarios = _choices(args.scenarios, MODES, parser)
    args.targets = _choices(args.targets, TARGETS, parser)
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
    place = Placement.split() if args.pin else Placement()
    print(
        f"load: {args.concurrency} connections, {args.warmup:g} s warm-up + {args.duration:g} s "
        f"per run, {args.client} client, upstream stream writes {args.upstream_writes}, "
        f"{place.describe()}"
    )
    try:
        with sigterm_as_interrupt():
            report = run(args, workdir, place)
    except BenchError as error:
        sys.exit(f"bench: {error}")
    except KeyboardInterrupt:
        sys.exit("bench: interrupted; every process is stopped")
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print()
    print_table(report["results"])
    print_ratios(report["ratios"])
    if report["metering"]:
        m = report["metering"]
        print(f"\nmetering: {m['metered']} usage records for {m['succeeded']} successful calls")
    print(f"\n(took {time.monotonic() - began:.0f} s)")
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "keep", "profile")}
        args.json.write_text(json.dumps({"settings": settings, **report}, indent=2))


if __name__ == "__main__":
    main()
