"""Reply heads are bounded (``HeadLimits``), byte for byte against raw socket servers.

A hostile upstream may send header lines of a megabyte each, millions of small fields, a
line that never ends, or the same in trailers after a chunked body. The client reads at
most the bound of any of them, fails the reply with ``HeadTooLarge`` (a ``BrokenReply``)
and closes the connection; a head within the bounds is read and the connection reused,
and once a reply was read its head is not kept by the idle connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from parley.http import BrokenReply, HeadLimits, HeadTooLarge, HttpClient, prepare
from parley.http.parsing import FIELD_FRAMING
from tests.http.rawserver import HeadFlood, RawServer, keep_alive_reply

OK_HEAD = b"HTTP/1.1 200 OK\r\n"
MIB = 1024 * 1024
SMALL = HeadLimits(max_bytes=4096, max_fields=20)


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    http = HttpClient()
    yield http
    await http.close()


@pytest.fixture
async def small_client() -> AsyncIterator[HttpClient]:
    http = HttpClient(head_limits=SMALL)
    yield http
    await http.close()


async def fetch(client: HttpClient, server: RawServer) -> tuple[int, dict[bytes, bytes], bytes]:
    request = prepare("POST", server.url, {})
    reply = await client.send(request, b"{}", connect_timeout=2.0, read_timeout=5.0)
    return reply.status, dict(reply.headers), await reply.read()


def fields(count: int, value_size: int = 8) -> bytes:
    return b"".join(b"X-F%03d: %s\r\n" % (index, b"v" * value_size) for index in range(count))


@pytest.mark.parametrize(("lines", "size"), [(200, MIB), (2_000_000, 8)])
async def test_a_flood_of_header_lines_fails_at_the_bound(
    client: HttpClient, lines: int, size: int
) -> None:
    flood = HeadFlood(lines, size)
    started = time.monotonic()
    async with flood.server as server:
        with pytest.raises(HeadTooLarge) as failed:
            await fetch(client, server)
        await asyncio.sleep(0.1)  # the server's next write fails: the connection was closed
    assert isinstance(failed.value, BrokenReply)
    assert flood.written * (size + 9) < 16 * MIB, "reading stopped near the bound"
    assert flood.written < lines
    assert time.monotonic() - started < 5


async def test_a_header_line_that_never_ends_fails_at_the_bound(client: HttpClient) -> None:
    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(OK_HEAD + b"X-Endless: ")
        for _ in range(4096):  # 256 MiB at most, should the client never stop
            writer.write(b"a" * 65536)
            await writer.drain()

    async with RawServer(endless) as server:
        with pytest.raises(HeadTooLarge):
            await fetch(client, server)


async def test_a_head_over_the_byte_bound_fails_and_one_at_it_is_read(
    small_client: HttpClient,
) -> None:
    # Content-Length: 2 is one field; the others fill the bound exactly.
    length_field = len(b"Content-Length") + len(b"2") + FIELD_FRAMING
    room = SMALL.max_bytes - length_field - (len(b"X-Fill") + FIELD_FRAMING)
    at_bound = OK_HEAD + b"X-Fill: " + b"f" * room + b"\r\nContent-Length: 2\r\n\r\n{}"
    over = at_bound.replace(b"X-Fill: ", b"X-Fill: f")
    async with RawServer.keeping_alive(at_bound, over) as server:
        status, headers, body = await fetch(small_client, server)
        assert (status, len(headers[b"x-fill"]), body) == (200, room, b"{}")
        with pytest.raises(HeadTooLarge):
            await fetch(small_client, server)
    assert server.connections == 1


async def test_more_fields_than_the_bound_fail(small_client: HttpClient) -> None:
    at_bound = keep_alive_reply(b"ok", fields(SMALL.max_fields - 1))  # with Content-Length
    over = keep_alive_reply(b"ok", fields(SMALL.max_fields))
    async with RawServer.keeping_alive(at_bound, over) as server:
        assert (await fetch(small_client, server))[2] == b"ok"
        with pytest.raises(HeadTooLarge):
            await fetch(small_client, server)
    assert server.connections == 1


async def test_a_big_head_within_the_default_bounds_is_read_and_reused(
    client: HttpClient,
) -> None:
    reply = keep_alive_reply(b"fine", fields(90, 600))  # 91 fields, about 55 KiB
    async with RawServer.keeping_alive(reply) as server:
        for _ in range(2):
            status, headers, body = await fetch(client, server)
            assert (status, len(headers), body) == (200, 91, b"fine")
    assert server.connections == 1


async def test_trailer_fields_count_against_the_bound(small_client: HttpClient) -> None:
    chunked = OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"
    async with RawServer.answering(chunked + fields(SMALL.max_fields) + b"\r\n") as server:
        with pytest.raises(HeadTooLarge):
            await fetch(small_client, server)


async def test_a_trailer_line_that_never_ends_fails_at_the_bound(client: HttpClient) -> None:
    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-T: ")
        for _ in range(4096):
            writer.write(b"t" * 65536)
            await writer.drain()

    async with RawServer(endless) as server:
        reply = await client.send(
            prepare("POST", server.url, {}), b"{}", connect_timeout=2.0, read_timeout=5.0
        )
        assert reply.status == 200
        with pytest.raises(HeadTooLarge):
            await reply.read()


async def test_an_idle_connection_keeps_no_headers_of_the_reply_it_carried(
    client: HttpClient,
) -> None:
    async with RawServer.keeping_alive(keep_alive_reply(b"ok", b"X-Marker: 1\r\n")) as server:
        reply = await client.send(
            prepare("POST", server.url, {}), b"{}", connect_timeout=2.0, read_timeout=5.0
        )
        assert reply.headers[b"x-marker"] == b"1"
        assert await reply.read() == b"ok"  # the connection goes back to the pool
        assert reply.headers[b"x-marker"] == b"1", "the reply keeps its own"
        (idle,) = client._pools[("http", "127.0.0.1", server.port)].idle
        assert idle.parser.headers == {}
    assert server.connections == 1
