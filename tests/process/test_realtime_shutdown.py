"""SIGTERM and a realtime session: the session goes on through the grace, then gets an
``error`` event and close code 1012, and its cut turn is written, billed for what it
delivered (a real ``parley serve`` against a fake realtime upstream, both processes)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import sys
from pathlib import Path

import aiohttp
import orjson

from tests.process.procs import REPO, Processes, _connects, free_port, wait_until

PRICES = {
    "input_per_1k": "0.004",
    "output_per_1k": "0.016",
    "audio_input_per_1k": "0.032",
    "audio_output_per_1k": "0.064",
}


async def session_across_sigterm(url: str, key: str, stop: object) -> tuple[list[str], int]:
    """Open a session, start a long response, SIGTERM the server; the events seen after
    it and the close code."""
    seen: list[str] = []
    async with aiohttp.ClientSession() as http:
        socket = await http.ws_connect(url, headers={"Authorization": f"Bearer {key}"})
        await socket.receive()  # session.created
        await socket.send_str('{"type": "response.create"}')
        while orjson.loads((await socket.receive()).data)["type"] != "response.output_audio.delta":
            pass
        stop()  # type: ignore[operator]
        async with asyncio.timeout(15):
            while True:
                message = await socket.receive()
                if message.type != aiohttp.WSMsgType.TEXT:
                    return seen, message.data if message.type == aiohttp.WSMsgType.CLOSE else 0
                event = orjson.loads(message.data)
                seen.append(event["error"]["code"] if event["type"] == "error" else event["type"])


def test_sigterm_ends_a_session_with_1012_and_writes_its_turn(
    procs: Processes, tmp_path: Path
) -> None:
    port = free_port()
    upstream = procs.spawn(
        "realtime",
        [sys.executable, "-m", "tests.upstreams.realtime", str(port), "0.05", "1000"],
        REPO,
    )
    wait_until(upstream, lambda: _connects(port), "fake realtime upstream")
    database = tmp_path / "parley.db"
    config = {
        "server": {"shutdown_grace_seconds": 1},
        "database": {"url": f"sqlite:///{database}"},
        "usage": {"flush_seconds": 30, "spill_dir": str(tmp_path)},
        "channels": [
            {
                "name": "rt",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "models": [{"name": "voice", "upstream": "gpt-realtime"}],
            }
        ],
        "models": [{"name": "voice", "kind": "realtime", "prices": PRICES}],
    }
    server = procs.serve(config)
    key = server.create_key()
    url = f"ws://127.0.0.1:{server.port}/v1/realtime?model=voice"

    def stop() -> None:
        server.process.send_signal(signal.SIGTERM)

    seen, code = asyncio.run(session_across_sigterm(url, key, stop))

    assert code == 1012
    assert seen[-1] == "service_unavailable"
    assert "response.output_audio.delta" in seen  # the grace: the session went on
    assert server.terminate() == 0
    assert "Traceback" not in server.output()
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT status, estimated, cost_nanos, endpoint FROM usage_records WHERE admitted"
        ).fetchall()
    [(status, estimated, cost, endpoint)] = rows
    assert (status, estimated, endpoint) == (599, 1, "/v1/realtime")
    assert cost > 0
