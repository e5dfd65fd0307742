"""What one tenant's 25 MiB body of same-role items costs it, and another tenant meanwhile.

Starts two instant fake upstreams (``bench.upstream``: one for each tenant's models, so
that the upstream reading the big body holds up nobody else) and one Parley (one worker,
SQLite, memory limiter) with two groups. The small tenant keeps ``--concurrency``
small chat calls in flight; after a second, the big tenant sends one body of
``--mib`` MiB whose items all have the same role (a Responses ``input``, chat ``messages``
to an Anthropic channel with ``--route chat-anthropic``, Messages ``messages`` to an
OpenAI-compatible channel with ``--route messages-openai``), each item a message of
``--text`` characters. Printed: the big call's status and time, the small tenant's
calls that overlapped it (count, p50, p99, max), and the CPU seconds each party spent
meanwhile (Parley's serving and body processes, the upstreams, this client, anything
else on the machine). A body of 1.5 MiB goes first, so that the body processes are up
(``--cold``: none, the big body pays for starting them).

    python -m bench.big_body                              # from the repo root, ~1 minute
    python -m bench.big_body --route chat-anthropic --text 200
    python -m bench.big_body --route messages-openai --blocks
    python -m bench.big_body --route messages-openai

Figures, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from bench.harness import parley_cli
from bench.kernel import children, cpu_seconds, machine_busy_seconds
from bench.processes import Services, free_ports, sigterm_as_interrupt, wait_until_ready

MODEL = "bench-model"
BIG = "bench-big"
CLAUDE = "bench-claude"
CONFIG = """\
server: {{host: 127.0.0.1, port: {port}, access_log: false}}
database: {{url: "sqlite:///{workdir}/parley.db"}}
usage: {{spill_dir: "{workdir}"}}
channels:
  - name: fake
    base_url: http://127.0.0.1:{upstream_port}/v1
    api_key: upstream-key
    models: [{{name: {model}, upstream: fake-model}}]
  - name: fake-big
    base_url: http://127.0.0.1:{big_port}/v1
    api_key: upstream-key
    models: [{{name: {big}, upstream: fake-model}}]
  - name: claude
    type: anthropic
    base_url: http://127.0.0.1:{big_port}/v1
    api_key: upstream-key
    models: [{{name: {claude}, upstream: fake-claude}}]
models:
  - name: {model}
    kind: chat
    prices: {{input_per_1k: 0.0005, output_per_1k: 0.0015}}
  - name: {big}
    kind: chat
    prices: {{input_per_1k: 0.0005, output_per_1k: 0.0015}}
  - name: {claude}
    kind: chat
    prices: {{input_per_1k: 0.0005, output_per_1k: 0.0015}}
"""
ROUTES = {
    "responses": ("/v1/responses", BIG, "input"),
    "chat-anthropic": ("/v1/chat/completions", CLAUDE, "messages"),
    "messages-openai": ("/v1/messages", BIG, "messages"),
    "messages-anthropic": ("/v1/messages", CLAUDE, "messages"),
}
"""Each route: its path, model (OpenAI-compatible or Anthropic channel) and item field.
``chat-anthropic`` and ``messages-openai`` are translated; ``messages-anthropic`` passes
the body through."""


def big_body(route: str, mib: float, text: int, blocks: bool = False) -> bytes:
    """A body of about ``mib`` MiB: one model, and items of one role (each item's content
    a list of one text block with ``blocks``)."""
    _, model, field = ROUTES[route]
    content: object = "x" * text
    if blocks:
        kind = "input_text" if route == "responses" else "text"
        content = [{"type": kind, "text": content}]
    item = {"role": "user", "content": content}
    count = int(mib * 1024 * 1024) // (len(orjson.dumps(item)) + 1)
    body: dict[str, object] = {"model": model, field: [item] * count}
    if route == "responses":
        body["store"] = False
    elif route.startswith("messages"):
        body["max_tokens"] = 16
    return orjson.dumps(body)


def send_big(port: int, key: str, path: str, body: bytes) -> tuple[int, float]:
    """The big call, whole, from a thread of its own: its status and seconds."""
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        connection.request("POST", path, body, headers)
        reply = connection.getresponse()
        reply.read()
    finally:
        connection.close()
    return reply.status, time.monotonic() - started


async def small_calls(
    port: int, key: str, concurrency: int, stop: asyncio.Event
) -> list[tuple[float, float, int]]:
    """The small tenant: ``concurrency`` loops of one-message chat calls until ``stop``;
    each call's start, end and status."""
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    body = orjson.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    calls: list[tuple[float, float, int]] = []
    async with aiohttp.ClientSession() as session:

        async def loop() -> None:
            while not stop.is_set():
                started = time.monotonic()
                async with session.post(url, data=body, headers=headers) as reply:
                    await reply.read()
                calls.append((started, time.monotonic(), reply.status))

        await asyncio.gather(*(loop() for _ in range(concurrency)))
    return calls


class CpuShares:
    """The CPU seconds each party spent while the big call ran (Linux ``/proc``): Parley's
    serving process, its body processes, the fake upstreams, this client, the machine."""

    def __init__(self, parley: int, upstreams: list[int]) -> None:
        self._parley = parley
        self._upstreams = upstreams
        self._before = self._after = self._taken()

    def _taken(self) -> dict[str, float]:
        def spent(pids: list[int]) -> float:
            return sum(cpu_seconds(pid) or 0.0 for pid in pids)

        return {
            "body processes": spent(children(self._parley)),
            "serving process": spent([self._parley]),
            "upstreams": spent(self._upstreams),
            "this client": spent([os.getpid()]),
            "machine": machine_busy_seconds() or 0.0,
        }

    def stop(self) -> None:
        """The counts taken again: the big call has ended."""
        self._after = self._taken()

    def report(self, wall: float) -> str:
        after = self._after
        spent = {name: after[name] - self._before[name] for name in after}
        machine = spent.pop("machine")
        parts = [f"{name} {seconds:.2f}" for name, seconds in spent.items()]
        rest = machine - sum(spent.values())
        cores = os.cpu_count() or 1
        return (
            f"  CPU seconds meanwhile ({cores} cores x {wall:.2f} s = {cores * wall:.2f}): "
            f"{', '.join(parts)}, anything else {rest:.2f}"
        )


async def measure(
    args: argparse.Namespace, port: int, small_key: str, big_key: str, pids: tuple[int, list[int]]
) -> None:
    path = ROUTES[args.route][0]
    body = big_body(args.route, args.mib, args.text, args.blocks)
    if not args.cold:  # the body processes started (and imported Parley) beforehand
        warm = big_body(args.route, 1.5, args.text, args.blocks)
        status, seconds = await asyncio.to_thread(send_big, port, big_key, path, warm)
        print(f"warm-up: a {len(warm) / 1048576:.1f} MiB body, status {status} in {seconds:.2f} s")
    stop = asyncio.Event()
    small = asyncio.create_task(small_calls(port, small_key, args.concurrency, stop))
    await asyncio.sleep(1.0)
    cpu = CpuShares(*pids)
    started = time.monotonic()
    status, seconds = await asyncio.to_thread(send_big, port, big_key, path, body)
    ended = time.monotonic()
    cpu.stop()
    await asyncio.sleep(0.5)
    stop.set()
    calls = await small
    during = [end - start for start, end, _ in calls if start < ended and end > started]
    failed = sum(1 for *_, code in calls if code != 200)
    print(
        f"{args.route}: {len(body) / 1048576:.1f} MiB, items of {args.text} characters: "
        f"status {status} in {seconds:.2f} s"
    )
    print(f"  the other tenant during it: {_latencies(during)}; {failed} not 200")
    print(cpu.report(ended - started))
    before = [end - start for start, end, _ in calls if end <= started]
    print(f"  the other tenant before it: {_latencies(before)}")


def _latencies(seconds: list[float]) -> str:
    if not seconds:
        return "no calls"
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"{len(ordered)} calls, p50 {statistics.median(ordered) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms"
    )


def _key(config: Path, group: str) -> str:
    parley_cli(config, "groups", "create", group, "--rpm", "100000000", "--tpm", "1000000000")
    return parley_cli(config, "keys", "create", "--group", group, "--name", group)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--route", choices=tuple(ROUTES), default="responses")
    parser.add_argument("--mib", type=float, default=24.9, help="the big body's size")
    parser.add_argument("--text", type=int, default=11, help="characters in each item")
    parser.add_argument(
        "--blocks",
        action="store_true",
        help="each item's content a list of one text block (not written straight through)",
    )
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--cold", action="store_true", help="no warm-up body: the big one starts the processes"
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="parley-big-body-"))
    try:
        with sigterm_as_interrupt(), Services(workdir) as services:
            upstream_port, big_port, port = free_ports(3)
            upstreams: list[int] = []
            for name, listen in (("upstream", upstream_port), ("big-upstream", big_port)):
                upstream_args = ["-m", "bench.upstream", "--port", str(listen)]
                upstream = services.start(name, listen, upstream_args)
                wait_until_ready(upstream)
                upstreams.append(upstream.pid)
            config = workdir / "parley.yaml"
            config.write_text(
                CONFIG.format(
                    port=port,
                    workdir=workdir,
                    upstream_port=upstream_port,
                    big_port=big_port,
                    model=MODEL,
                    big=BIG,
                    claude=CLAUDE,
                )
            )
            parley_cli(config, "db", "upgrade")
            small_key, big_key = _key(config, "small"), _key(config, "big")
            serve = ["-m", "parley", "serve", "--config", str(config), "--port", str(port)]
            parley = services.start("parley", port, serve, cwd=workdir)
            wait_until_ready(parley, "/health")
            asyncio.run(measure(args, port, small_key, big_key, (parley.pid, upstreams)))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
