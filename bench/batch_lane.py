"""Interactive latency with a large batch running, against none: the batch lane's share.

The upstream is a model server of bounded capacity (``--slots`` calls served at once,
each taking ``--service-ms``; the rest wait their turn), the way a self-hosted engine
queues. One Parley (one worker, SQLite, memory limiter) serves ``bench-model`` from it,
with ``batches.per_channel`` equal to the upstream's slots: a fixed share that large
would take the whole upstream. A closed loop of ``--concurrency`` interactive callers
(``bench.loadgen``, whole chat replies) runs for a warm-up and a measured window, in
three scenarios:

- ``alone``: no batch;
- ``batch``: a batch of ``--lines`` chat lines created just before the load, with the
  adaptive share (the default): the lane's share of the channel halves when the
  interactive calls slow down and grows back a line every ``batches.grow_seconds``;
- ``batch-fixed``: the same batch with ``batches.adaptive: false`` (``per_channel``
  always).

    python -m bench.batch_lane                       # from the repo root, ~2 minutes
    python -m bench.batch_lane --duration 30 --concurrency 2 --slots 4

It prints one line per scenario (interactive requests/s, p50, p99, p99 against
``alone``, batch lines answered in the window) and stops every process it started, also
on Ctrl-C. ``upstream`` as the first argument runs the bounded upstream alone.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from bench.harness import PATH, create_key, parley_cli
from bench.processes import BenchError, Services, free_ports, sigterm_as_interrupt, wait_until_ready

MODEL = "bench-model"
JSON = "application/json"
SCENARIOS = ("alone", "batch", "batch-fixed")
CONFIG = """\
server: {{host: 127.0.0.1, port: {port}, access_log: false}}
database: {{url: "sqlite:///{workdir}/parley.db"}}
usage: {{spill_dir: "{workdir}"}}
batches: {{per_channel: {slots}, concurrency: {slots}, poll_seconds: 0.05, adaptive: {adaptive}}}
channels:
  - name: engine
    base_url: http://127.0.0.1:{upstream_port}/v1
    api_key: upstream-key
    models: [{{name: {model}, upstream: fake-model}}]
    timeouts: {{connect: 5, read: 120}}
models:
  - name: {model}
    kind: chat
    prices: {{input_per_1k: 0.0005, output_per_1k: 0.0015, batch_discount: 0.5}}
"""
REPLY = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "word " * 20},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 20, "total_tokens": 29},
    }
)


def bounded_upstream(port: int, slots: int, service_ms: float) -> None:
    """``POST /v1/chat/completions``: at most ``slots`` served at once, ``service_ms``
    each; the others wait in line (first come, first served)."""
    gate = asyncio.Semaphore(slots)

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        async with gate:
            await asyncio.sleep(service_ms / 1000)
        return web.Response(body=REPLY, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def run_scenario(
    args: argparse.Namespace, scenario: str, workdir: Path, upstream_port: int
) -> dict[str, Any]:
    (parley_port,) = free_ports(1)
    folder = workdir / scenario
    folder.mkdir()
    config = folder / "parley.yaml"
    adaptive = "false" if scenario == "batch-fixed" else "true"
    config.write_text(
        CONFIG.format(
            port=parley_port,
            workdir=folder,
            upstream_port=upstream_port,
            model=MODEL,
            slots=args.slots,
            adaptive=adaptive,
        )
    )
    parley_cli(config, "db", "upgrade")
    key = create_key(config)
    with Services(folder) as services:
        serve = ["-m", "parley", "serve", "--config", str(config), "--port", str(parley_port)]
        parley = services.start("parley", parley_port, serve, cwd=folder)
        wait_until_ready(parley, "/health")
        batch_id = None
        if scenario != "alone":
            batch_id = _create_batch(parley_port, key, args.lines)
        before = _answered(parley_port, key, batch_id)
        started = time.monotonic()
        shares: list[float] = []
        sampler = threading.Thread(target=_sample_share, args=(parley_port, args, shares))
        sampler.start()
        result = _drive(args, parley_port, key)
        sampler.join()
        seconds = time.monotonic() - started
        result["batch_lines_per_s"] = (_answered(parley_port, key, batch_id) - before) / seconds
        result["shares"] = shares
    return {"scenario": scenario, **result}


def _sample_share(port: int, args: argparse.Namespace, shares: list[float]) -> None:
    """The lane's share of the channel (``/metrics``), once a second over the window."""
    time.sleep(args.warmup)
    ends = time.monotonic() + args.duration
    while time.monotonic() < ends:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            connection.request("GET", "/metrics")
            text = connection.getresponse().read().decode()
        finally:
            connection.close()
        for line in text.splitlines():
            if line.startswith('parley_batch_lane_share{channel="engine"}'):
                shares.append(float(line.split()[-1]))
        time.sleep(1)


def _request(port: int, key: str, method: str, path: str, body: bytes, *, kind: str) -> Any:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": kind}
        connection.request(method, path, body, headers)
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    if response.status != 200:
        raise BenchError(f"{method} {path}: {response.status} {data[:300]!r}")
    return json.loads(data)


def _create_batch(port: int, key: str, lines: int) -> str:
    text = b"\n".join(
        orjson.dumps(
            {
                "custom_id": f"line-{n}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": MODEL, "messages": [{"role": "user", "content": f"n {n}"}]},
            }
        )
        for n in range(lines)
    )
    boundary = uuid.uuid4().hex
    form = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
            "Content-Type: application/jsonl\r\n\r\n"
        ).encode()
        + text
        + f"\r\n--{boundary}--\r\n".encode()
    )
    multipart = f"multipart/form-data; boundary={boundary}"
    made = _request(port, key, "POST", "/v1/files", form, kind=multipart)
    body = {"input_file_id": made["id"], "endpoint": PATH, "completion_window": "24h"}
    batch = _request(port, key, "POST", "/v1/batches", orjson.dumps(body), kind=JSON)
    if batch["status"] != "in_progress":
        raise BenchError(f"the batch is {batch['status']}: {batch.get('errors')}")
    return str(batch["id"])


def _answered(port: int, key: str, batch_id: str | None) -> int:
    if batch_id is None:
        return 0
    batch = _request(port, key, "GET", f"/v1/batches/{batch_id}", b"", kind=JSON)
    return int(batch["request_counts"]["completed"])


def _drive(args: argparse.Namespace, port: int, key: str) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "bench.loadgen",
        "--url", f"http://127.0.0.1:{port}{PATH}",
        "--key", key,
        "--model", MODEL,
        "--concurrency", str(args.concurrency),
        "--duration", str(args.duration),
        "--warmup", str(args.warmup),
    ]  # fmt: skip
    budget = args.warmup + args.duration + 120
    done = subprocess.run(command, capture_output=True, text=True, timeout=budget, check=False)
    if done.returncode != 0:
        raise BenchError(f"load generator failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    if sys.argv[1:2] == ["upstream"]:
        port, slots, service_ms = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
        bounded_upstream(port, slots, service_ms)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=2, help="Interactive callers.")
    parser.add_argument("--slots", type=int, default=4, help="Calls the upstream serves at once.")
    parser.add_argument("--service-ms", type=float, default=100.0)
    parser.add_argument("--lines", type=int, default=5000, help="Lines of the batch.")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="parley-batch-lane-"))
    results: list[dict[str, Any]] = []
    try:
        with sigterm_as_interrupt(), Services(workdir) as services:
            (upstream_port,) = free_ports(1)
            upstream = [
                "-m", "bench.batch_lane", "upstream",
                str(upstream_port), str(args.slots), str(args.service_ms),
            ]  # fmt: skip
            wait_until_ready(services.start("upstream", upstream_port, upstream))
            for scenario in args.scenarios.split(","):
                results.append(run_scenario(args, scenario, workdir, upstream_port))
                _print(results[-1], results[0] if results[0]["scenario"] == "alone" else None)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


def _print(result: dict[str, Any], alone: dict[str, Any] | None) -> None:
    against = ""
    if alone is not None and result is not alone:
        against = f" ({result['p99_ms'] / alone['p99_ms'] - 1:+.0%} against alone)"
    print(
        f"{result['scenario']:>12}: {result['rps']:6.1f} req/s  "
        f"p50 {result['p50_ms']:6.1f} ms  p99 {result['p99_ms']:6.1f} ms{against}  "
        f"errors {result['errors']}  batch lines {result['batch_lines_per_s']:5.1f}/s"
        f"  share {' '.join(f'{share:g}' for share in result['shares']) or '-'}",
        flush=True,
    )


if __name__ == "__main__":
    main()
