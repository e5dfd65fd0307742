"""The upstream client's pools: a cap on connections per origin, and idle connections
retired before the upstream's own ``Keep-Alive: timeout`` (on a clock the test moves)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from parley.http import Disconnected, HttpClient, PoolTimeout, ReadTimeout, Reply, prepare
from tests.http.rawserver import RawServer, keep_alive_reply


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def open_reply(client: HttpClient, server: RawServer, connect_timeout: float = 2.0) -> Reply:
    request = prepare("POST", server.url, {})
    return await client.send(request, b"{}", connect_timeout=connect_timeout, read_timeout=5.0)


async def call(client: HttpClient, server: RawServer) -> bytes:
    return await (await open_reply(client, server)).read()


@pytest.fixture
async def one_per_origin() -> AsyncIterator[HttpClient]:
    client = HttpClient(max_per_origin=1)
    yield client
    await client.close()


async def test_calls_beyond_the_cap_wait_for_a_parked_connection(
    one_per_origin: HttpClient,
) -> None:
    async with RawServer.keeping_alive(keep_alive_reply(b"ok")) as server:
        replies = await asyncio.gather(*(call(one_per_origin, server) for _ in range(5)))
    assert replies == [b"ok"] * 5
    assert server.connections == 1


async def test_waiting_for_a_free_connection_is_bounded_by_the_connect_timeout(
    one_per_origin: HttpClient,
) -> None:
    async with RawServer.keeping_alive(keep_alive_reply(b"ok")) as server:
        held = await open_reply(one_per_origin, server)
        with pytest.raises(PoolTimeout):
            await open_reply(one_per_origin, server, connect_timeout=0.05)
        assert await held.read() == b"ok"
        assert await call(one_per_origin, server) == b"ok", "the slot was not lost"
    assert server.connections == 1


async def test_a_closed_connection_frees_its_slot_for_a_waiting_call(
    one_per_origin: HttpClient,
) -> None:
    async with RawServer.keeping_alive(keep_alive_reply(b"ok")) as server:
        held = await open_reply(one_per_origin, server)
        waiting = asyncio.create_task(call(one_per_origin, server))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        held.close()
        assert await waiting == b"ok"
    assert server.connections == 2


async def test_a_waiting_call_cancelled_gives_its_turn_away(one_per_origin: HttpClient) -> None:
    async with RawServer.keeping_alive(keep_alive_reply(b"ok")) as server:
        held = await open_reply(one_per_origin, server)
        cancelled = asyncio.create_task(call(one_per_origin, server))
        later = asyncio.create_task(call(one_per_origin, server))
        await asyncio.sleep(0.01)
        cancelled.cancel()
        assert await held.read() == b"ok"
        assert await later == b"ok"
        assert await call(one_per_origin, server) == b"ok"
    assert server.connections == 1


async def test_failed_calls_give_their_slots_back(one_per_origin: HttpClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        if server.connections <= 3:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\ncut")  # then closed
        else:
            writer.write(keep_alive_reply(b"ok"))

    async with RawServer(handler) as server:
        for _ in range(3):
            with pytest.raises(Disconnected):
                await call(one_per_origin, server)
        assert await call(one_per_origin, server) == b"ok"


async def test_the_cap_is_per_origin(one_per_origin: HttpClient) -> None:
    async with (
        RawServer.keeping_alive(keep_alive_reply(b"a")) as first,
        RawServer.keeping_alive(keep_alive_reply(b"b")) as second,
    ):
        held = await open_reply(one_per_origin, first)
        assert await call(one_per_origin, second) == b"b"
        assert await held.read() == b"a"


async def test_a_closed_client_fails_waiting_calls(one_per_origin: HttpClient) -> None:
    async with RawServer.keeping_alive(keep_alive_reply(b"ok")) as server:
        held = await open_reply(one_per_origin, server)
        waiting = asyncio.create_task(call(one_per_origin, server))
        await asyncio.sleep(0.01)
        await one_per_origin.close()
        with pytest.raises(Exception, match="closed"):
            await waiting
        held.close()


@pytest.mark.parametrize(
    ("hint", "idle", "connections"),
    [
        (b"", 14.9, 1),  # the client's own keep-alive: 15 s
        (b"", 15.1, 2),
        (b"Keep-Alive: timeout=5, max=100\r\n", 3.9, 1),  # retired a second early
        (b"Keep-Alive: timeout=5, max=100\r\n", 4.1, 2),
        (b"Keep-Alive: max=100, timeout = 30\r\n", 14.9, 1),  # never past the client's own
        (b"Keep-Alive: timeout=1\r\n", 0.0, 2),
        (b"Keep-Alive: timeout=soon\r\n", 14.9, 1),  # unreadable: ignored
    ],
)
async def test_idle_connections_retire_before_the_upstreams_keep_alive_timeout(
    hint: bytes, idle: float, connections: int
) -> None:
    clock = Clock()
    client = HttpClient(clock=clock)
    async with RawServer.keeping_alive(keep_alive_reply(b"ok", hint)) as server:
        assert await call(client, server) == b"ok"
        clock.now += idle
        assert await call(client, server) == b"ok"
    await client.close()
    assert server.connections == connections


HANG_GUARD = 30.0
"""Not a measurement: only stops a broken reaper from hanging the suite."""


async def test_an_idle_connection_is_closed_when_its_keep_alive_runs_out() -> None:
    """With no later call to find it expired, the pool's own timer closes it, and its
    slot is free again."""
    closed = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(keep_alive_reply(b"ok"))
        await writer.drain()
        if server.connections == 1:
            await reader.read()  # b"" once the client closed its end
            closed.set()

    client = HttpClient(max_per_origin=1, keepalive_seconds=0.05)
    async with RawServer(handler) as server:
        assert await call(client, server) == b"ok"
        await asyncio.wait_for(closed.wait(), HANG_GUARD)
        assert await call(client, server) == b"ok", "the reaped connection's slot was lost"
    await client.close()
    assert server.connections == 2


async def test_a_connection_reused_in_time_is_not_reaped() -> None:
    clock = Clock()
    client = HttpClient(clock=clock, keepalive_seconds=15.0)
    async with RawServer.keeping_alive(keep_alive_reply(b"ok")) as server:
        for _ in range(3):
            assert await call(client, server) == b"ok"
            clock.now += 10.0  # each call finds the connection 10 s idle: within 15
    await client.close()
    assert server.connections == 1


async def test_a_reused_connection_times_out_on_its_own_calls_read_timeout() -> None:
    """The silence watch a first call armed (a long read timeout) must not let a later
    call on the same connection, with a short one, wait longer than its own."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(keep_alive_reply(b"ok"))
        await server.read_request(reader)
        await asyncio.sleep(HANG_GUARD)  # the second reply never comes

    client = HttpClient()
    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        first = await client.send(request, b"{}", connect_timeout=2.0, read_timeout=HANG_GUARD)
        assert await first.read() == b"ok"
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(ReadTimeout):
            await client.send(request, b"{}", connect_timeout=2.0, read_timeout=0.2)
        assert loop.time() - began < HANG_GUARD / 2
    await client.close()
    assert server.connections == 1
