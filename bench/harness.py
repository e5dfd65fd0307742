"""What every ``bench.load`` mode shares: Parley's config and key, the smoke test, one
run of the load generator, the metering count and the throughput table."""

from __future__ import annotations

import argparse
import http.client
import json
import math
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from bench.processes import BenchError, Service, Services, clean_environment, cpu_list

MODEL = "bench-model"
PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"
"""Where ``bench.load``'s ``messages`` scenario calls (Parley only)."""
SLOW_MODEL = "bench-slow"
CONFIG = """\
server: {{host: 127.0.0.1, port: {port}, access_log: false}}
database: {{url: "sqlite:///{workdir}/parley.db"}}
limits: {limits}
redis: {{url: "redis://127.0.0.1:6379/0", prefix: "{redis_prefix}"}}
usage: {{spill_dir: "{workdir}"}}
upstream: {{max_connections_per_origin: 20000}}
channels:
  - name: fake
    type: openai
    base_url: http://127.0.0.1:{upstream_port}/v1
    api_key: upstream-key
    models: [{{name: {model}, upstream: fake-model}}, {{name: {slow}, upstream: slow-model}}]
models:
  - name: {model}
    kind: chat
    context_window: 32768
    prices: {{input_per_1k: 0.0005, output_per_1k: 0.0015}}
  - name: {slow}
    kind: chat
    context_window: 32768
    prices: {{input_per_1k: 0.0005, output_per_1k: 0.0015}}
"""
"""The upstream pool is as unbounded as the bare relay's (Parley's default, 1,000
connections per origin, would queue the slow streams past it)."""


def write_parley_config(
    workdir: Path, port: int, upstream_port: int, limits: str = "{backend: memory}"
) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "parley.yaml"
    text = CONFIG.format(
        port=port,
        workdir=workdir,
        upstream_port=upstream_port,
        model=MODEL,
        slow=SLOW_MODEL,
        limits=limits,
        redis_prefix=f"parley-bench-{uuid.uuid4().hex[:12]}",
    )
    path.write_text(text)
    return path


def checkout_environment(root: Path | None) -> dict[str, str]:
    """What a process needs to import ``parley`` from the checkout ``root`` (none: the one
    this Python finds, the working tree's when run from it)."""
    return {} if root is None else {"PYTHONPATH": str(root.resolve())}


def parley_cli(config: Path, *args: str, root: Path | None = None) -> str:
    command = [sys.executable, "-m", "parley", "--config", str(config), *args]
    done = subprocess.run(
        command,
        cwd=config.parent,
        env=clean_environment() | checkout_environment(root),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise BenchError(f"`parley {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout.strip()


def parley_location(workdir: Path, root: Path | None = None) -> str:
    """Where the ``parley`` package that will be served is imported from."""
    done = subprocess.run(
        [sys.executable, "-c", "import parley, os; print(os.path.dirname(parley.__file__))"],
        cwd=workdir,
        env=clean_environment() | checkout_environment(root),
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or f"unknown ({done.stderr.strip()[-200:]})"


def create_key(config: Path, root: Path | None = None) -> str:
    limits = ("--rpm", "100000000", "--tpm", "1000000000")
    parley_cli(config, "groups", "create", "bench", *limits, root=root)
    return parley_cli(config, "keys", "create", "--group", "bench", "--name", "load", root=root)


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
        "--url", f"http://127.0.0.1:{port}{MESSAGES_PATH if mode == 'messages' else PATH}",
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


def stop_and_count(
    services: Services, parley: Service, folder: Path, succeeded: int
) -> dict[str, int]:
    """Stop one Parley (a clean stop writes every record) and count what it metered in
    ``folder``'s database against its ``succeeded`` calls, the smoke test's two added."""
    if services.stop(parley) != 0:
        print(f"{parley.name} did not stop cleanly:\n{parley.log_tail()}")
    return {"succeeded": 2 + succeeded, "metered": metered_records(folder)}


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
        f"{'round':<6}{'target':<10}{'mode':<8}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
        f"{'srv CPU':>9}{'µs CPU/req':>12}{'upstr CPU':>11}{'client CPU':>12}{'srv RSS MB':>12}"
    )
    print(header)
    print("-" * len(header))
    for row in results:
        server = row["cpu"].get("server", {})
        upstream = row["cpu"].get("upstream", {}) if row["target"] != "direct" else {}
        print(
            f"{row['round']:<6}{row['target']:<10}{row['mode']:<8}{_number(row['rps']):>9}"
            f"{_number(row['p50_ms'], 1):>9}{_number(row['p99_ms'], 1):>9}{row['errors']:>8}"
            f"{_share(server.get('share')):>9}{_number(server.get('us_per_request')):>12}"
            f"{_share(upstream.get('share')):>11}{_share(row['client_cpu_share']):>12}"
            f"{_number(row['rss_mb'].get('server'), 0):>12}"
        )
    for row in results:
        if row["errors"]:
            print(f"first error, {row['target']} {row['mode']}: {row['first_error']}")
