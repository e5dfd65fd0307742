"""Throughput and p99 when one of a model's two channels is dead, against both healthy.

Starts the instant fake upstream (``bench.upstream``) and, per scenario, one Parley
(one worker, SQLite, memory limiter) whose ``bench-model`` has two channels of equal
priority and weight, then drives it with ``bench.loadgen`` (a closed loop of N
connections) for a warm-up and a measured window:

- ``healthy``: both channels point at the upstream;
- ``dead``: the second points at a port where nothing listens (every connection is
  refused), with the circuit breaker on (the default);
- ``dead-no-breaker``: the same, with ``breaker.enabled: false``, so every call whose
  draw puts the dead channel first pays for a refused connection.

    python -m bench.dead_channel                         # from the repo root, ~1 minute
    python -m bench.dead_channel --duration 10 --concurrency 32

It prints one line per scenario (requests/s, p50, p99, errors, calls that reached the
dead channel) and stops every process it started, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import PATH, create_key, parley_cli, smoke_test
from bench.processes import (
    BenchError,
    Services,
    free_ports,
    sigterm_as_interrupt,
    wait_until_ready,
)

MODEL = "bench-model"
SCENARIOS = ("healthy", "dead", "dead-no-breaker")
CONFIG = """\
server: {{host: 127.0.0.1, port: {port}, access_log: false}}
database: {{url: "sqlite:///{workdir}/parley.db"}}
usage: {{spill_dir: "{workdir}"}}
upstream: {{max_connections_per_origin: 20000}}
channels:
  - name: first
    base_url: http://127.0.0.1:{upstream_port}/v1
    api_key: upstream-key
    models: [{{name: {model}, upstream: fake-model}}]
  - name: second
    base_url: http://127.0.0.1:{second_port}/v1
    api_key: upstream-key
    models: [{{name: {model}, upstream: fake-model}}]
    breaker: {{enabled: {breaker}}}
models:
  - name: {model}
    kind: chat
    prices: {{input_per_1k: 0.0005, output_per_1k: 0.0015}}
"""


def run_scenario(
    args: argparse.Namespace, scenario: str, workdir: Path, upstream_port: int
) -> dict[str, Any]:
    parley_port, dead_port = free_ports(2)  # nothing listens on dead_port
    folder = workdir / scenario
    folder.mkdir()
    config = folder / "parley.yaml"
    config.write_text(
        CONFIG.format(
            port=parley_port,
            workdir=folder,
            upstream_port=upstream_port,
            second_port=upstream_port if scenario == "healthy" else dead_port,
            model=MODEL,
            breaker="false" if scenario == "dead-no-breaker" else "true",
        )
    )
    parley_cli(config, "db", "upgrade")
    key = create_key(config)
    with Services(folder) as services:
        serve = ["-m", "parley", "serve", "--config", str(config), "--port", str(parley_port)]
        parley = services.start("parley", parley_port, serve, cwd=folder)
        wait_until_ready(parley, "/health")
        smoke_test(scenario, parley_port, key)
        result = _drive(args, parley_port, key)
        result["dead_attempts"] = _log_count(parley.log, "upstream call failed")
    return {"scenario": scenario, **result}


def _drive(args: argparse.Namespace, port: int, key: str) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "bench.loadgen",
        "--url", f"http://127.0.0.1:{port}{PATH}",
        "--mode", args.mode,
        "--key", key,
        "--model", MODEL,
        "--concurrency", str(args.concurrency),
        "--duration", str(args.duration),
        "--warmup", str(args.warmup),
    ]  # fmt: skip
    budget = args.warmup + args.duration + 60
    done = subprocess.run(command, capture_output=True, text=True, timeout=budget, check=False)
    if done.returncode != 0:
        raise BenchError(f"load generator failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def _log_count(log: Path, text: str) -> int:
    return log.read_text(errors="replace").count(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--mode", choices=("plain", "stream"), default="plain")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="parley-dead-channel-"))
    results: list[dict[str, Any]] = []
    try:
        with sigterm_as_interrupt(), Services(workdir) as services:
            (upstream_port,) = free_ports(1)
            upstream_args = ["-m", "bench.upstream", "--port", str(upstream_port)]
            wait_until_ready(services.start("upstream", upstream_port, upstream_args))
            for scenario in args.scenarios.split(","):
                results.append(run_scenario(args, scenario, workdir, upstream_port))
                _print(results[-1])
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


def _print(result: dict[str, Any]) -> None:
    print(
        f"{result['scenario']:>16}: {result['rps']:8.0f} req/s  "
        f"p50 {result['p50_ms']:7.1f} ms  p99 {result['p99_ms']:7.1f} ms  "
        f"errors {result['errors']}  failed attempts logged {result['dead_attempts']}",
        flush=True,
    )


if __name__ == "__main__":
    main()
