"""A database that hangs does not hold the shutdown: the usage records are spilled in time.

PostgreSQL is shared, so the hang is a ``TcpProxy`` between ``parley serve`` and it,
frozen (connections accepted, nothing answered) before SIGTERM; on SQLite, another
connection holds the file's write lock. The database's own
timeout is 30 s here, so a shutdown that waited on it (once for the write in progress,
once per final attempt, once to close) would be killed by an orchestrator's usual 30 s.
The process must exit within the grace and the closing time instead, with every usage
record and every stored response in its spill files, and the next start must write them
all, once.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import orjson
import pytest

from parley.store.engine import SQLITE_BUSY_TIMEOUT_MS
from tests.process.calls import CALL_SECONDS, Chat, burst, gateway_config, get
from tests.process.conftest import PostgresDatabase
from tests.process.procs import Processes, Server, usage_count
from tests.process.proxy import TcpProxy
from tests.services import POSTGRES_HOST, POSTGRES_PORT, postgres_through

T = TypeVar("T")
CALLS = 20
STREAMS = 3
GRACE = 2.0
CLOSING = 2.0
EXIT_SLACK = 8.0
"""The exit itself (2 s for SQLAlchemy to give up on each frozen connection), generous
for a loaded machine; waiting on the database would take its 30 s timeout at least once."""
LONG_MODEL = "chat-long"


class ProxyThread:
    """A ``TcpProxy`` on an event loop of its own thread, so a synchronous test (which
    blocks on processes) does not stop it from forwarding."""

    def __init__(self, target_port: int) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.proxy = self.run(self._start, target_port)

    @staticmethod
    async def _start(target_port: int) -> TcpProxy:
        proxy = TcpProxy(target_port, POSTGRES_HOST)
        await proxy.start()
        return proxy

    def run(self, work: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        return asyncio.run_coroutine_threadsafe(work(*args), self._loop).result(timeout=30)

    def freeze(self) -> None:
        self._loop.call_soon_threadsafe(self.proxy.freeze)

    def stop(self) -> None:
        self.run(self.proxy.stop)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


@pytest.fixture
def proxy() -> Iterator[ProxyThread]:
    running = ProxyThread(POSTGRES_PORT)
    try:
        yield running
    finally:
        running.stop()


def spilled(directory: Path) -> list[dict[str, Any]]:
    return [
        orjson.loads(line)
        for path in sorted(directory.glob("parley-usage-spill-*.jsonl"))
        for line in path.read_bytes().splitlines()
        if line
    ]


async def streams_across_sigterm(server: Server, key: str) -> tuple[float, list[bytes]]:
    """Open ``STREAMS`` long streams, SIGTERM once each has sent its first event, read
    them to their end (the shutdown ends them), and wait for the process to exit: how
    long it took from the signal, and the bodies."""
    body = {"model": LONG_MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    headers = {"Authorization": f"Bearer {key}"}
    timeout = aiohttp.ClientTimeout(total=CALL_SECONDS + GRACE)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        responses = await asyncio.gather(
            *(
                session.post(f"{server.v1}/chat/completions", json=body, headers=headers)
                for _ in range(STREAMS)
            )
        )
        try:
            assert [r.status for r in responses] == [200] * STREAMS
            firsts = await asyncio.gather(*(r.content.readline() for r in responses))
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            rests = await asyncio.gather(*(r.read() for r in responses))
        finally:
            for response in responses:
                response.release()
    code = await asyncio.to_thread(server.process.wait, GRACE + CLOSING + 30)
    took = time.monotonic() - signalled
    assert code == 0, server.output()
    return took, [first + rest for first, rest in zip(firsts, rests, strict=True)]


@pytest.mark.postgres
def test_a_frozen_database_at_shutdown_costs_the_closing_time_and_loses_nothing(
    procs: Processes,
    engine: str,
    tmp_path: Path,
    postgres_db: PostgresDatabase,
    proxy: ProxyThread,
) -> None:
    through_proxy = postgres_through(postgres_db.url, "127.0.0.1", proxy.proxy.port)
    config = gateway_config(
        engine,
        tmp_path,
        database_url=through_proxy,
        server={"shutdown_grace_seconds": GRACE, "shutdown_close_seconds": CLOSING},
        usage={"flush_seconds": 30},  # nothing is written before the signal
    )
    config["database"]["timeout_seconds"] = 30
    config["channels"][0]["models"].append({"name": LONG_MODEL, "upstream": "words-400+slow-0.05"})
    config["models"].append({"name": LONG_MODEL, "kind": "chat"})
    server = procs.serve(config, wait=False)
    key = server.create_key()
    server.wait_ready()
    replies = burst([Chat(server.v1, key, stream=i % 2 == 0) for i in range(CALLS)])
    assert [r.status for r in replies] == [200] * CALLS
    assert get(f"{server.base_url}/health", key).json()["usage_backlog"] == CALLS

    proxy.freeze()
    took, bodies = asyncio.run(streams_across_sigterm(server, key))

    assert took < GRACE + CLOSING + EXIT_SLACK, server.output()
    for body in bodies:  # ended by the shutdown at the end of the grace
        assert body.rstrip().endswith(b"data: [DONE]")
        assert b"shutting down" in body
    records = spilled(tmp_path)
    assert len(records) == CALLS + STREAMS
    assert len({record["request_id"] for record in records}) == CALLS + STREAMS
    assert sorted(record["status"] for record in records)[-STREAMS:] == [599] * STREAMS
    assert f"{CALLS + STREAMS} usage records kept in" in server.output()
    assert "Traceback" not in server.output()

    direct = gateway_config(engine, tmp_path, database_url=postgres_db.url)
    restarted = procs.serve(direct, name="restarted")  # replays the spill
    assert f"replayed {CALLS + STREAMS} spilled usage records" in restarted.output()
    assert restarted.terminate() == 0
    assert usage_count(postgres_db.url) == CALLS + STREAMS


STORED = 6


async def stored_responses(server: Server, key: str) -> list[str]:
    """``STORED`` Responses calls with ``store`` (the default), at once: their ids."""
    headers = {"Authorization": f"Bearer {key}"}
    body = {"model": "chat-large", "input": "keep this"}
    timeout = aiohttp.ClientTimeout(total=CALL_SECONDS)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:

        async def one() -> str:
            async with session.post(f"{server.v1}/responses", json=body) as reply:
                assert reply.status == 200, await reply.text()
                return str((await reply.json())["id"])

        return list(await asyncio.gather(*(one() for _ in range(STORED))))


@pytest.mark.postgres
def test_stored_responses_outlive_a_frozen_database_at_shutdown(
    procs: Processes,
    engine: str,
    tmp_path: Path,
    postgres_db: PostgresDatabase,
    proxy: ProxyThread,
) -> None:
    """Each caller was given an id: the responses the database did not take at shutdown
    are spilled beside the usage records and written at the next start, once."""
    through_proxy = postgres_through(postgres_db.url, "127.0.0.1", proxy.proxy.port)
    config = gateway_config(
        engine,
        tmp_path,
        database_url=through_proxy,
        server={"shutdown_grace_seconds": GRACE, "shutdown_close_seconds": CLOSING},
    )
    config["database"]["timeout_seconds"] = 30
    server = procs.serve(config, wait=False)
    key = server.create_key()
    server.wait_ready()
    assert burst([Chat(server.v1, key)])[0].status == 200  # the key is known from now on

    proxy.freeze()  # the first response's write hangs; the others wait behind it
    ids = asyncio.run(stored_responses(server, key))
    for response_id in ids:  # read from memory while the database is away
        assert get(f"{server.v1}/responses/{response_id}", key).status == 200
    signalled = time.monotonic()
    assert server.terminate(timeout=60) == 0
    # bounded well short of the database's 30 s timeout, with room for a loaded machine:
    # two books (usage and responses) share the closing time
    assert time.monotonic() - signalled < CLOSING + 2 * EXIT_SLACK, server.output()
    assert f"{STORED} stored responses kept in" in server.output()
    assert "Traceback" not in server.output()

    direct = gateway_config(engine, tmp_path, database_url=postgres_db.url)
    restarted = procs.serve(direct, name="restarted")  # replays both spills
    assert f"replayed {STORED} spilled stored responses" in restarted.output()
    for response_id in ids:
        found = get(f"{restarted.v1}/responses/{response_id}", key)
        assert found.status == 200 and found.json()["id"] == response_id
    assert restarted.terminate() == 0
    assert not list(tmp_path.glob("parley-responses-spill-*"))


SQLITE_BUSY_SECONDS = SQLITE_BUSY_TIMEOUT_MS / 1000


def test_a_locked_sqlite_file_at_shutdown_costs_the_closing_time_and_loses_nothing(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    """Another process holds the file's write lock: each write waits the 5 s busy timeout
    and fails, and the final attempts (three of them) waited it out one after another."""
    database = tmp_path / "parley.db"
    config = gateway_config(
        engine,
        tmp_path,
        database_url=f"sqlite:///{database}",
        server={"shutdown_grace_seconds": GRACE, "shutdown_close_seconds": CLOSING},
        usage={"flush_seconds": 30},
    )
    server = procs.serve(config, wait=False)
    key = server.create_key()
    server.wait_ready()
    replies = burst([Chat(server.v1, key, stream=i % 2 == 0) for i in range(CALLS)])
    assert [r.status for r in replies] == [200] * CALLS

    holder = sqlite3.connect(database, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # the write lock, held until the rollback
        signalled = time.monotonic()
        assert server.terminate(timeout=60) == 0
        took = time.monotonic() - signalled
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    # a store thread already waiting for the lock finishes its wait before the exit
    assert took < CLOSING + SQLITE_BUSY_SECONDS + EXIT_SLACK, server.output()
    records = spilled(tmp_path)
    assert len({record["request_id"] for record in records}) == CALLS
    assert usage_count(f"sqlite:///{database}") == 0

    restarted = procs.serve(config, name="restarted")  # replays the spill
    assert f"replayed {CALLS} spilled usage records" in restarted.output()
    assert restarted.terminate() == 0
    assert usage_count(f"sqlite:///{database}") == CALLS
