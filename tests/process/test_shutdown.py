"""SIGTERM loses no usage: every record queued (and every call in flight) is written.

The writer's flush interval is 30 s here, so nothing reaches the database before the
signal: every record counted afterwards was written by the shutdown itself. A second
SIGTERM during the shutdown (a repeated ``kill``; systemd's cgroup kill plus the parent's
SIGTERM to a worker) must not cut it short.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import aiohttp
import orjson

from parley.domain.tokens import estimate_text
from tests.process.calls import CALL_SECONDS, Chat, burst, gateway_config, get
from tests.process.procs import Processes, Server, usage_count

CALLS = 50
SLOW_MODEL = "chat-slow"
SLOW_WORDS = 20


def start(procs: Processes, engine: str, tmp_path: Path) -> tuple[Server, str, str]:
    """A gateway that holds usage records for 30 s, serving a fast and a slow model."""
    database = f"sqlite:///{tmp_path / 'parley.db'}"
    config = gateway_config(engine, tmp_path, database_url=database, usage={"flush_seconds": 30})
    config["channels"][0]["models"].append(
        {"name": SLOW_MODEL, "upstream": f"words-{SLOW_WORDS}+slow-0.05"}
    )
    config["models"].append({"name": SLOW_MODEL, "kind": "chat"})
    server = procs.serve(config, wait=False)
    key = server.create_key()  # while the server starts
    server.wait_ready()
    return server, key, database


def test_sigterm_writes_every_queued_usage_record(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    server, key, database = start(procs, engine, tmp_path)
    chats = [Chat(server.v1, key, stream=i % 2 == 1, text=f"call {i}") for i in range(CALLS)]

    replies = burst(chats, concurrency=10)

    assert [r.status for r in replies] == [200] * CALLS
    for chat, reply in zip(chats, replies, strict=True):
        if chat.stream:
            assert reply.body.rstrip().endswith(b"data: [DONE]")
            assert f"echo: {chat.text}".split()[-1].encode() in reply.body
        else:
            assert reply.json()["choices"][0]["message"]["content"] == f"echo: {chat.text}"
    health = get(f"{server.base_url}/health", key)
    assert health.json() == {"status": "ok", "usage_backlog": CALLS}
    assert usage_count(database) == 0  # still queued: the flush interval is 30 s

    assert server.terminate() == 0
    assert usage_count(database) == CALLS
    assert "Traceback" not in server.output()
    assert not list(tmp_path.glob("parley-usage-spill-*"))


def test_calls_in_flight_at_sigterm_finish_and_are_metered(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    server, key, database = start(procs, engine, tmp_path)

    bodies = asyncio.run(streams_across_sigterm(server, key, count=10))

    assert server.terminate() == 0  # a third SIGTERM, if it is still writing usage
    said = server.output()
    assert "already shutting down" in said
    # The first signal is answered at once, before the calls in flight have finished.
    assert 0 <= said.index("stopping: calls in flight have up to") < said.index("already")
    for body in bodies:
        events = [line[6:] for line in body.splitlines() if line.startswith(b"data: ")]
        assert events[-1] == b"[DONE]"
        words = [
            choice["delta"].get("content")
            for event in events[:-1]
            for choice in orjson.loads(event)["choices"]
        ]
        assert len([w for w in words if w]) == SLOW_WORDS
    assert usage_count(database) == len(bodies)


async def streams_across_sigterm(
    server: Server, key: str, count: int, model: str = SLOW_MODEL
) -> list[bytes]:
    """Start ``count`` slow streams (about 1 s each), SIGTERM the server (twice) once
    every one has sent its first event, then read each to its end: the whole bodies."""
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    headers = {"Authorization": f"Bearer {key}"}
    timeout = aiohttp.ClientTimeout(total=CALL_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        responses = await asyncio.gather(
            *(
                session.post(f"{server.v1}/chat/completions", json=body, headers=headers)
                for _ in range(count)
            )
        )
        try:
            assert [r.status for r in responses] == [200] * count
            firsts = await asyncio.gather(*(r.content.readline() for r in responses))
            server.process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.1)
            server.process.send_signal(signal.SIGTERM)  # a second one must not cut it short
            rests = await asyncio.gather(*(r.read() for r in responses))
        finally:
            for response in responses:
                response.release()
    return [first + rest for first, rest in zip(firsts, rests, strict=True)]


LONG_MODEL = "chat-long"
LONG_WORDS = 400
"""At 0.05 s a word, 20 s: far longer than the grace, however busy the machine."""
GRACE = 1


def test_streams_open_when_the_grace_ends_get_an_error_event_and_done_and_are_billed(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    """At the end of the grace every open stream is ended by the gateway: an error event,
    ``[DONE]``, a usage record with status 599 (not 499, a caller who left) billing the
    words delivered. aiohttp alone kept relaying until twice the grace, then cut the
    connection with neither."""
    database = tmp_path / "parley.db"
    config = gateway_config(
        engine,
        tmp_path,
        database_url=f"sqlite:///{database}",
        server={"shutdown_grace_seconds": GRACE},
    )
    config["channels"][0]["models"].append(
        {"name": LONG_MODEL, "upstream": f"words-{LONG_WORDS}+slow-0.05"}
    )
    prices = {"input_per_1k": "0.001", "output_per_1k": "0.002"}
    config["models"].append({"name": LONG_MODEL, "kind": "chat", "prices": prices})
    server = procs.serve(config, wait=False)
    key = server.create_key()
    server.wait_ready()

    bodies = asyncio.run(streams_across_sigterm(server, key, count=3, model=LONG_MODEL))

    assert server.terminate() == 0
    assert "shutdown grace of 1s is over: ending 3 open streams" in server.output()
    delivered = []
    for body in bodies:
        events = [line[6:] for line in body.splitlines() if line.startswith(b"data: ")]
        assert events[-1] == b"[DONE]"
        error = orjson.loads(events[-2])["error"]
        assert error["code"] == "service_unavailable"
        assert "shutting down" in error["message"]
        words = [
            choice["delta"].get("content")
            for event in events[:-2]
            for choice in orjson.loads(event)["choices"]
        ]
        text = "".join(w for w in words if w)
        assert 0 < len(text.split()) < LONG_WORDS
        delivered.append(estimate_text(text))  # the tokens of what the caller got
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT status, completion_tokens, cost_nanos FROM usage_records"
        ).fetchall()
    assert [status for status, _, _ in rows] == [599] * 3
    assert sorted(tokens for _, tokens, _ in rows) == sorted(delivered)
    assert all(cost > 0 for _, _, cost in rows)
