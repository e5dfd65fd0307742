"""What one Parley worker spends per call, counted the same on a busy machine as on a quiet one.

    python -m bench.count_calls --repo . --out /tmp/cg.parley              # Parley, this checkout
    python -m bench.count_calls --repo /path/to/other/checkout --out /tmp/cg.other
    python -m bench.count_calls --repo bare --out /tmp/cg.bare              # the bare relay
    python -m bench.count_calls --repo . --tool strace --out /tmp/strace.txt  # system calls
    python -m bench.count_calls --repo . --tool cprofile --out /tmp/calls.prof  # Python calls

Starts the fake upstream (``bench/upstream.py``) and the server under test, the server
under ``valgrind --tool=callgrind`` with collection off; sends ``--warm`` calls, switches
collection on, sends ``--n`` calls (``--conc`` at once, the load generator's raw client),
dumps the counts and stops everything. ``callgrind_annotate OUT.1`` reads them; the
``totals`` line divided by ``--n`` is the instructions per call, which (unlike CPU time)
does not depend on what else the machine runs. Work done every so many seconds would
count about fifty times too much (the server runs that much slower under valgrind), so
the usage writer flushes by batch size only (``flush_seconds: 1000``: each batch holds
500 records, as under ``bench.load``; ``--usage`` changes it), and the directory's
refresh, the voice deletions' scan and the batch lane's look for work and lease (each a
query on the database's threads) come hourly; the metrics sampler (once a second) and
the heap trim (every 10 s) still run. Needs valgrind (and strace for ``--tool strace``).

``--mode`` is ``plain`` or ``stream`` (chat completions, whole or streamed), ``messages``
(a streamed ``POST /v1/messages`` over the same OpenAI-compatible channel: Parley
translates the chat stream into Anthropic's events) or ``passthrough`` (a streamed
``POST /v1/messages`` to a ``type: anthropic`` channel, relayed as it comes) or
``responses`` (a streamed ``POST /v1/responses`` with ``store: false`` over the
OpenAI-compatible channel: Parley renders the chat stream as Responses events). The bare
relay has only the chat modes: the Messages and Responses figures are read against its
``stream``.

``--tool cprofile`` runs the server under ``bench/profiled.py`` instead: cProfile on the
event loop's thread for the counted calls only, written to OUT (``python -m pstats OUT``).
Its call counts divided by ``--n`` are the Python functions one call runs, which names
where instructions go that callgrind attributes to the interpreter; its times are
inflated by its own cost per call, so read them only against each other.

``--threads`` has callgrind count each thread apart: ``OUT.1-01`` is the event loop's
thread, the other files the usage writer's (the metering write) and any executor's.
A batch of usage records is written every 500 calls, so count at least 1,000 calls after
a warm-up of 500 or more (``--n 1000 --warm 600``) for a figure that holds the writer's
steady share and not its first batch (which also prepares its statements).

``--allocator malloc|jemalloc|mimalloc`` runs the server (Parley or the bare relay) on
that allocator, through the environment ``parley serve --allocator`` would set
(``parley.heap.allocator_environment``): callgrind does not replace ``malloc``, so the
preloaded library's instructions are counted too. Its tunings (``MALLOC_CONF``,
``MIMALLOC_*``) pass through from this command's environment.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.loadgen import check_reply, request_body
from bench.rawhttp import Connection, Reply, request_bytes
from parley.heap import ALLOCATORS, allocator_environment

HERE = Path(__file__).resolve().parent.parent

CONFIG = """\
server: {{host: 127.0.0.1, port: {port}, access_log: false}}
database: {{url: "sqlite:///{workdir}/parley.db"}}
limits: {{backend: memory, cache_refresh_seconds: 3600}}
usage: {usage}
audio: {{clone_deletion_scan_seconds: 3600}}
batches: {{poll_seconds: 3600, lease_seconds: 10800}}
channels:
  - name: fake
    type: openai
    base_url: http://127.0.0.1:{upstream_port}/v1
    api_key: upstream-key
    models: [{{name: bench-model, upstream: fake-model}}]
models:
  - name: bench-model
    kind: chat
    context_window: 32768
    prices: {{input_per_1k: 0.0005, output_per_1k: 0.0015}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"port {port} never opened")


ANTHROPIC_CHANNEL = """\
  - name: fake-anthropic
    type: anthropic
    base_url: http://127.0.0.1:{upstream_port}/v1
    api_key: upstream-key
    models: [{{name: bench-claude, upstream: fake-model}}]
"""
RESPONSE_COMPLETED = b'event: response.completed\ndata: {"type":"response.completed"'


def responses_body(model: str) -> bytes:
    messages = orjson.loads(request_body(model, "plain"))["messages"]
    items = [{"role": m["role"], "content": m["content"]} for m in messages]
    return orjson.dumps({"model": model, "input": items, "store": False, "stream": True})


def check_responses_stream(reply: Reply) -> str:
    if reply.status != 200:
        return f"status {reply.status}: {reply.body[:200]!r}"
    return "" if RESPONSE_COMPLETED in reply.body else "stream without response.completed"


async def send(port: int, key: str, mode: str, n: int, conc: int) -> int:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    if mode in ("messages", "passthrough"):
        model = "bench-model" if mode == "messages" else "bench-claude"
        body, url = request_body(model, "messages"), f"http://127.0.0.1:{port}/v1/messages"
    elif mode == "responses":
        body, url = responses_body("bench-model"), f"http://127.0.0.1:{port}/v1/responses"
    else:
        body, url = (
            request_body("bench-model", mode),
            f"http://127.0.0.1:{port}/v1/chat/completions",
        )
    host, p, request = request_bytes(url, body, headers)
    left = [n]
    bad = [0]

    async def loop() -> None:
        c = Connection(host, p)
        try:
            while left[0] > 0:
                left[0] -= 1
                reply = await c.post(request)
                if mode == "responses":
                    problem = check_responses_stream(reply)
                else:
                    problem = check_reply(reply, "messages" if mode == "passthrough" else mode)
                if problem:
                    bad[0] += 1
                    if bad[0] < 3:
                        print("ERR", problem, file=sys.stderr)
        finally:
            c.close()

    await asyncio.gather(*(loop() for _ in range(conc)))
    return bad[0]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, help="A Parley checkout, or `bare`.")
    parser.add_argument(
        "--mode",
        choices=("plain", "stream", "messages", "passthrough", "responses"),
        default="plain",
    )
    parser.add_argument(
        "--tool", default="callgrind", choices=("callgrind", "strace", "cprofile", "none")
    )
    parser.add_argument("--n", type=int, default=1500, help="Calls counted.")
    parser.add_argument("--warm", type=int, default=600, help="Calls before counting.")
    parser.add_argument("--conc", type=int, default=32, help="Calls at once.")
    parser.add_argument("--out", required=True, help="callgrind's (or strace's) output file.")
    parser.add_argument("--usage", default='{{spill_dir: "{workdir}", flush_seconds: 1000}}')
    parser.add_argument("--extra", default="", help="YAML appended to Parley's config.")
    parser.add_argument(
        "--threads",
        action="store_true",
        help="callgrind counts each thread apart (OUT.1-01 the event loop's, the others "
        "the usage writer's and the executor's), so the metering write reads on its own.",
    )
    parser.add_argument(
        "--allocator",
        choices=ALLOCATORS,
        default="pymalloc",
        help="The server's allocator, set in its environment as `parley serve --allocator` "
        "would (re-executing would leave valgrind); MALLOC_CONF, MIMALLOC_* pass through.",
    )
    return parser.parse_args()


def server_command(args: argparse.Namespace, config: Path, port: int, up_port: int) -> list[str]:
    if args.repo == "bare":
        relay = str(HERE / "bench/bare_relay.py")
        upstream = f"http://127.0.0.1:{up_port}/v1"
        serve = [sys.executable, relay, "--port", str(port), "--upstream", upstream]
    else:
        serve = [sys.executable, "-m", "parley", "serve", "--config", str(config)]
        serve += ["--port", str(port)]
    if args.tool == "cprofile" and args.repo != "bare":
        return [sys.executable, str(HERE / "bench/profiled.py"), args.out, *serve[1:]]
    if args.tool != "callgrind":
        return serve
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        *(["--separate-threads=yes"] if args.threads else []),
        f"--callgrind-out-file={args.out}",
        *serve,
    ]


def make_key(config: Path, env: dict[str, str]) -> str:
    def cli(*words: str) -> str:
        command = [sys.executable, "-m", "parley", "--config", str(config), *words]
        done = subprocess.run(
            command, cwd=config.parent, env=env, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    cli("groups", "create", "bench", "--rpm", "100000000", "--tpm", "1000000000")
    return cli("keys", "create", "--group", "bench", "--name", "load")


def count(args: argparse.Namespace, pid: int, port: int, key: str) -> None:
    """The warm-up, then the counted calls with the tool collecting."""
    asyncio.run(send(port, key, args.mode, args.warm, args.conc))
    time.sleep(1)
    tracer = None
    if args.tool == "callgrind":
        control("-i", "on", pid)
    elif args.tool == "cprofile":
        os.kill(pid, signal.SIGUSR1)
    elif args.tool == "strace":
        strace = ["strace", "-c", "-f", "-o", args.out, "-p", str(pid)]
        tracer = subprocess.Popen(strace, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
    began = time.time()
    bad = asyncio.run(send(port, key, args.mode, args.n, args.conc))
    wall = time.time() - began
    if args.tool == "callgrind":
        control("-d", None, pid)
        control("-i", "off", pid)
    if args.tool == "cprofile":
        os.kill(pid, signal.SIGUSR2)
        time.sleep(2)
    if tracer is not None:
        tracer.send_signal(signal.SIGINT)
        tracer.wait()
    print(f"sent {args.n} ({bad} failed) in {wall:.1f}s", file=sys.stderr)


def control(option: str, value: str | None, pid: int) -> None:
    words = [option] if value is None else [option, value]
    subprocess.run(["callgrind_control", *words, str(pid)], check=True, capture_output=True)


def main() -> None:
    args = arguments()
    workdir = Path(tempfile.mkdtemp(prefix="count-calls-"))
    up_port, port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PARLEY", "PYTHON"))}
    env["PYTHONPATH"] = str(HERE if args.repo == "bare" else Path(args.repo).resolve())
    upstream = subprocess.Popen(
        [sys.executable, "-m", "bench.upstream", "--port", str(up_port)],
        cwd=HERE,
        env={**env, "PYTHONPATH": str(HERE)},
    )
    config = workdir / "parley.yaml"
    usage = args.usage.format(workdir=workdir)
    text = CONFIG.format(port=port, workdir=workdir, upstream_port=up_port, usage=usage)
    if args.mode == "passthrough":
        channel = ANTHROPIC_CHANNEL.format(upstream_port=up_port)
        text = text.replace(
            "models:\n  - name: bench-model", channel + "models:\n  - name: bench-model"
        )
        prices = "{input_per_1k: 0.0005, output_per_1k: 0.0015}"
        text += f"  - {{name: bench-claude, kind: chat, prices: {prices}}}\n"
    config.write_text(text + args.extra)
    key = "bare" if args.repo == "bare" else make_key(config, env)
    command = server_command(args, config, port, up_port)
    with (workdir / "server.log").open("w") as log:
        server_env = allocator_environment(args.allocator, env)
        # Chosen here, never by serve: its re-execution would leave valgrind.
        server_env.setdefault("PYTHONMALLOC", "pymalloc")
        server = subprocess.Popen(command, cwd=workdir, env=server_env, stderr=log)
        try:
            wait_port(up_port, 30)
            wait_port(port, 600)
            count(args, server.pid, port, key)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(120)
            except subprocess.TimeoutExpired:
                server.kill()
            upstream.terminate()
            upstream.wait()
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
