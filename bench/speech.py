"""Speech streaming through Parley against a bare byte relay: time to first audio byte, bytes/s.

One command starts three processes on 127.0.0.1 — a fake speech engine (this module,
``--serve engine``: ``POST /v1/audio/speech`` answers a precomputed 10-second 24 kHz WAV
with a streamed header, in 20 pieces ``--gap`` seconds apart, like an engine producing
audio), a bare relay (``--serve bare``: aiohttp.web + one ``ClientSession``, bytes relayed
as they arrive) and Parley (``python -m parley serve``, one ``openai-audio`` channel, a key
made with the CLI) — then drives each with ``--connections`` concurrent callers for
``--duration`` seconds, and prints, per target, calls, p50/p99 time to the first audio
byte, and audio bytes/s delivered.

    python -m bench.speech                      # from the repo root, about 30 s
    python -m bench.speech --connections 32 --gap 0 --duration 10
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import struct
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from aiohttp import web

from bench.load import parley_cli
from bench.processes import Services, free_ports, wait_until_ready

RATE = 24000
SECONDS = 10
PIECES = 20
MODEL = "bench-tts"
CONFIG = """\
server: {{host: 127.0.0.1, port: {port}, access_log: false}}
database: {{url: "sqlite:///{workdir}/parley.db"}}
usage: {{spill_dir: "{workdir}"}}
channels:
  - {{name: engine, type: openai-audio, base_url: "http://127.0.0.1:{engine}/v1",
      models: [{model}]}}
models:
  - {{name: {model}, kind: speech, prices: {{per_1k_characters: "0.015"}},
      audio: {{voice_listing: false}}}}
"""


def audio_pieces() -> list[bytes]:
    pcm = bytes(RATE * 2 * SECONDS)
    header = b"RIFF\xff\xff\xff\xffWAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, RATE, RATE * 2, 2, 16
    )
    size = len(pcm) // PIECES
    pieces = [pcm[i : i + size] for i in range(0, len(pcm), size)]
    pieces[0] = header + b"data\xff\xff\xff\xff" + pieces[0]
    return pieces


def engine_app(gap: float) -> web.Application:
    pieces = audio_pieces()

    async def speech(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "audio/wav"})
        await response.prepare(request)
        for piece in pieces:
            await response.write(piece)
            if gap:
                await asyncio.sleep(gap)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/audio/speech", speech)
    return app


def bare_app(engine: str) -> web.Application:
    session_key = web.AppKey("session", aiohttp.ClientSession)

    async def speech(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with request.app[session_key].post(
            f"{engine}/audio/speech", data=body, headers={"Content-Type": "application/json"}
        ) as upstream:
            response = web.StreamResponse(headers={"Content-Type": upstream.content_type})
            await response.prepare(request)
            async for piece in upstream.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response

    async def session(app: web.Application) -> AsyncIterator[None]:
        app[session_key] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        yield
        await app[session_key].close()

    app = web.Application()
    app.router.add_post("/v1/audio/speech", speech)
    app.cleanup_ctx.append(session)
    return app


async def drive(port: int, key: str, connections: int, duration: float) -> dict[str, float]:
    """Closed loop of ``connections`` callers; first-byte latencies and bytes delivered."""
    first_bytes: list[float] = []
    delivered = 0
    deadline = time.monotonic() + duration
    body = {"model": MODEL, "input": "The quick brown fox jumps over the lazy dog."}
    headers = {"Authorization": f"Bearer {key}"}
    url = f"http://127.0.0.1:{port}/v1/audio/speech"

    async def caller(session: aiohttp.ClientSession) -> None:
        nonlocal delivered
        while time.monotonic() < deadline:
            started = time.monotonic()
            async with session.post(url, json=body, headers=headers) as reply:
                first = await reply.content.readany()
                first_bytes.append(time.monotonic() - started)
                size = len(first) + len(await reply.read())
            delivered += size

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.monotonic()
        await asyncio.gather(*(caller(session) for _ in range(connections)))
        elapsed = time.monotonic() - started
    ordered = sorted(first_bytes)
    return {
        "calls": len(ordered),
        "ttfb_p50_ms": statistics.median(ordered) * 1000,
        "ttfb_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "mb_per_s": delivered / elapsed / 1e6,
    }


def run(args: argparse.Namespace) -> None:
    engine_port, bare_port, parley_port = free_ports(3)
    with tempfile.TemporaryDirectory(prefix="parley-speech-bench-") as folder:
        workdir = Path(folder)
        config = workdir / "parley.yaml"
        config.write_text(
            CONFIG.format(port=parley_port, workdir=workdir, engine=engine_port, model=MODEL)
        )
        with Services(workdir) as services:
            me = ["-m", "bench.speech", "--serve"]
            engine = services.start(
                "engine",
                engine_port,
                [*me, "engine", "--port", str(engine_port), "--gap", str(args.gap)],
            )
            bare = services.start(
                "bare",
                bare_port,
                [*me, "bare", "--port", str(bare_port), "--engine-port", str(engine_port)],
            )
            parley = services.start(
                "parley",
                parley_port,
                ["-m", "parley", "--config", str(config), "serve"],
                cwd=workdir,
            )
            for service in (engine, bare, parley):
                wait_until_ready(service)
            parley_cli(
                config, "groups", "create", "bench", "--rpm", "100000000", "--tpm", "1000000000"
            )
            key = parley_cli(config, "keys", "create", "--group", "bench")
            print(f"{'target':8} {'calls':>6} {'ttfb p50':>10} {'ttfb p99':>10} {'MB/s':>8}")
            for name, port in (("bare", bare_port), ("parley", parley_port)):
                figures = asyncio.run(drive(port, key, args.connections, args.duration))
                print(
                    f"{name:8} {figures['calls']:6.0f} {figures['ttfb_p50_ms']:8.1f}ms"
                    f" {figures['ttfb_p99_ms']:8.1f}ms {figures['mb_per_s']:8.1f}"
                )


def serve(args: argparse.Namespace) -> None:
    if args.serve == "engine":
        app = engine_app(args.gap)
    else:
        app = bare_app(f"http://127.0.0.1:{args.engine_port}/v1")
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", choices=("engine", "bare"))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--engine-port", type=int, default=0)
    parser.add_argument("--gap", type=float, default=0.01, help="seconds between engine pieces")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=float, default=8.0)
    args = parser.parse_args()
    if args.serve:
        serve(args)
        return
    run(args)


if __name__ == "__main__":
    main()
