"""The upstream HTTP client against real sockets: framing, keep-alive, failures.

Each test runs a raw asyncio server that writes exactly the bytes under test, so the
framings an engine may use (length, chunks, close-delimited, gzip) and the ways a
connection may fail are all exercised byte for byte.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import ssl
import struct
import threading
import zlib
from collections.abc import AsyncIterator

import pytest
import trustme
import uvloop

from parley.http import (
    BrokenReply,
    ConnectFailed,
    Disconnected,
    HttpClient,
    ReadTimeout,
    ReplyTooLarge,
    prepare,
)
from parley.http.connection import HIGH_WATER
from tests.http.rawserver import RawServer, ThreadServer, keep_alive_reply

READ_SIZE = 256 * 1024
"""The most one socket read delivers (asyncio's and uvloop's buffers are smaller)."""


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    http = HttpClient()
    yield http
    await http.close()


async def call(client: HttpClient, server: RawServer, read_timeout: float = 5.0) -> bytes:
    request = prepare("POST", server.url, {"Content-Type": "application/json"})
    reply = await client.send(request, b"{}", connect_timeout=2.0, read_timeout=read_timeout)
    return await reply.read()


async def test_sequential_calls_share_one_kept_alive_connection(client: HttpClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            writer.write(keep_alive_reply(b"pong"))

    async with RawServer(handler) as server:
        assert [await call(client, server) for _ in range(3)] == [b"pong"] * 3
    assert server.connections == 1


async def test_the_request_is_well_formed(client: HttpClient) -> None:
    async with RawServer.answering(keep_alive_reply(b"ok")) as server:
        await call(client, server)
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}".encode() in lines
    assert b"Accept-Encoding: identity" in lines
    assert b"Content-Length: 2" in lines
    assert body == b"{}"


async def test_a_chunked_body_is_reassembled(client: HttpClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b"hel", b"lo ", b"world"):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
        await server.read_request(reader)  # kept alive: the next call comes on this one
        writer.write(keep_alive_reply(b"again"))

    async with RawServer(handler) as server:
        assert await call(client, server) == b"hello world"
        assert await call(client, server) == b"again"
    assert server.connections == 1


async def test_a_body_ended_by_closing_the_connection(client: HttpClient) -> None:
    async with RawServer.answering(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"
    ) as server:
        assert await call(client, server) == b"until the end"
        assert await call(client, server) == b"until the end"
    assert server.connections == 2


async def test_an_interim_reply_is_skipped_for_the_real_one(client: HttpClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(keep_alive_reply(b"real"))

    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"", connect_timeout=2.0, read_timeout=5.0)
        assert (reply.status, await reply.read()) == (200, b"real")
        assert b"link" not in reply.headers


async def test_a_gzip_body_is_decoded(client: HttpClient) -> None:
    async with RawServer.answering(
        keep_alive_reply(gzip.compress(b"x" * 5000), b"Content-Encoding: gzip\r\n")
    ) as server:
        assert await call(client, server) == b"x" * 5000


async def test_an_unknown_encoding_is_a_broken_reply(client: HttpClient) -> None:
    async with RawServer.answering(
        keep_alive_reply(b"??", b"Content-Encoding: zstd\r\n")
    ) as server:
        with pytest.raises(BrokenReply):
            await call(client, server)


async def test_a_connection_the_upstream_closed_while_idle_is_replaced(
    client: HttpClient,
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(keep_alive_reply(b"once"))
        await writer.drain()  # then close: an idle timeout on the upstream's side

    async with RawServer(handler) as server:
        assert await call(client, server) == b"once"
        await asyncio.sleep(0.05)
        assert await call(client, server) == b"once"
    assert server.connections == 2
    assert len(server.requests) == 2, "each request reached the upstream exactly once"


async def test_a_request_the_upstream_read_before_closing_is_never_sent_again(
    client: HttpClient,
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(keep_alive_reply(b"first"))
        await server.read_request(reader)  # read whole, then closed without a byte of reply

    async with RawServer(handler) as server:
        assert await call(client, server) == b"first"
        with pytest.raises(Disconnected):
            await call(client, server)
    assert server.connections == 1
    assert len(server.requests) == 2, "each request reached the upstream exactly once"


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("ending", ["close", "reset"])
def test_an_idle_connection_found_dead_before_the_loop_saw_it_is_not_written_to(
    ending: str, loop: str
) -> None:
    """The upstream ends an idle connection and the kernel knows, but the event loop has
    not run since: the socket is polled before the request is written, and the request
    goes on a new connection, once."""
    ended = threading.Event()
    go = threading.Event()

    def handler(sock: socket.socket, server: ThreadServer) -> None:
        server.read_request(sock)
        sock.sendall(keep_alive_reply(b"ok"))
        if server.connections == 1:
            go.wait(5)
            if ending == "reset":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            ended.set()

    async def scenario(server: ThreadServer) -> list[bytes]:
        client = HttpClient()
        request = prepare("POST", server.url, {})
        first = await (await client.send(request, b"{}", connect_timeout=2, read_timeout=5)).read()
        go.set()
        assert ended.wait(5)  # blocks the loop: it cannot see the end before the next send
        second = await client.send(request, b"{}", connect_timeout=2, read_timeout=5)
        replies = [first, await second.read()]
        await client.close()
        return replies

    factory = uvloop.new_event_loop if loop == "uvloop" else asyncio.new_event_loop
    with ThreadServer(handler) as server, asyncio.Runner(loop_factory=factory) as runner:
        assert runner.run(scenario(server)) == [b"ok", b"ok"]
    assert server.connections == 2
    assert len(server.requests) == 2


async def test_a_connection_that_failed_midway_is_not_retried(client: HttpClient) -> None:
    async with RawServer.answering(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\npart") as server:
        with pytest.raises(Disconnected):
            await call(client, server)
    assert server.connections == 1


async def test_a_reply_cut_midway_is_disconnected(client: HttpClient) -> None:
    async with RawServer.answering(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part"
    ) as server:
        with pytest.raises(Disconnected):
            await call(client, server)


async def test_a_silent_upstream_is_a_read_timeout(client: HttpClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        await asyncio.sleep(5)

    async with RawServer(handler) as server:
        with pytest.raises(ReadTimeout):
            await call(client, server, read_timeout=0.1)


async def test_a_reply_that_is_not_http_is_broken(client: HttpClient) -> None:
    async with RawServer.answering(b"SSH-2.0-OpenSSH_9.2\r\n\r\n") as server:
        with pytest.raises(BrokenReply):
            await call(client, server)


async def test_nobody_listening_is_connect_failed(client: HttpClient) -> None:
    async with RawServer(lambda reader, writer: asyncio.sleep(0)) as server:
        url = server.url
    request = prepare("POST", url, {})
    with pytest.raises(ConnectFailed) as failed:
        await client.send(request, b"", connect_timeout=2.0, read_timeout=2.0)
    assert "127.0.0.1" not in str(failed.value)


async def test_a_big_body_streams_through_with_reading_paused_and_resumed(
    client: HttpClient,
) -> None:
    size = 3 * HIGH_WATER + 12345

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        for start in range(0, size, 65536):
            writer.write(b"z" * min(65536, size - start))
            await writer.drain()

    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"", connect_timeout=2.0, read_timeout=5.0)
        await asyncio.sleep(0.3)  # let the upstream run ahead: the client must pause it
        assert HIGH_WATER < reply.buffered <= HIGH_WATER + READ_SIZE
        total = 0
        async for piece in reply.pieces():
            assert piece
            total += len(piece)
        assert reply.finished
        reply.release()
    assert total == size


async def test_closing_a_reply_early_hangs_up_on_the_upstream(client: HttpClient) -> None:
    hung_up = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        if await reader.read() == b"":
            hung_up.set()

    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"", connect_timeout=2.0, read_timeout=5.0)
        assert await anext(reply.pieces()) == b"first"
        assert not reply.finished
        reply.close()
        async with asyncio.timeout(2):
            await hung_up.wait()


async def test_https_is_verified_against_the_trusted_authorities() -> None:
    authority = trustme.CA()
    certificate = authority.issue_cert("localhost")
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(served)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(2)
        writer.write(keep_alive_reply(b"secure" if b"Host: localhost:" in request else b"?"))
        await writer.drain()

    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    request = prepare("POST", f"https://localhost:{port}/v1/x", {})
    try:
        trusting = ssl.create_default_context()
        authority.configure_trust(trusting)
        trusted = HttpClient(tls=trusting)
        reply = await trusted.send(request, b"{}", connect_timeout=2.0, read_timeout=2.0)
        assert await reply.read() == b"secure"
        await trusted.close()
        stranger = HttpClient()  # the system's authorities do not know this one
        with pytest.raises(ConnectFailed, match="SSL"):
            await stranger.send(request, b"{}", connect_timeout=2.0, read_timeout=2.0)
        await stranger.close()
    finally:
        server.close()


def test_the_head_names_the_host_as_http_wants_it() -> None:
    head = prepare("POST", "http://[::1]:8080/v1/x?api-version=2", {"A": "b"}).head
    assert head.startswith(b"POST /v1/x?api-version=2 HTTP/1.1\r\nHost: [::1]:8080\r\n")
    assert b"\r\nA: b\r\n" in head
    tls = prepare("POST", "https://api.example.com/v1/chat/completions", {})
    assert tls.origin == ("https", "api.example.com", 443)
    assert b"Host: api.example.com\r\n" in tls.head


@pytest.mark.parametrize("value", ["Bearer k\r\nX-Evil: 1", "k\n", "k\0"])
def test_a_header_value_with_a_line_break_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="Authorization"):
        prepare("POST", "http://127.0.0.1/v1", {"Authorization": value})


def test_only_http_urls_are_prepared() -> None:
    with pytest.raises(ValueError, match="http"):
        prepare("POST", "ftp://example.com/v1", {})


# Bounds on a whole reply


async def test_a_reply_declared_over_the_limit_is_refused_before_its_body(
    client: HttpClient,
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\nstart")
        await writer.drain()
        if await reader.read() == b"":
            hung_up.set()

    hung_up = asyncio.Event()
    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"", connect_timeout=2.0, read_timeout=5.0)
        with pytest.raises(ReplyTooLarge):
            await reply.read(limit=1000)
        async with asyncio.timeout(2):
            await hung_up.wait()


async def test_a_reply_passing_the_limit_stops_being_read_there(client: HttpClient) -> None:
    written = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal written
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(1000):  # 64 MiB, far more than any socket buffer holds
            writer.write(b"10000\r\n" + b"q" * 65536 + b"\r\n")
            await writer.drain()
            written += 65536

    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"", connect_timeout=2.0, read_timeout=5.0)
        with pytest.raises(ReplyTooLarge):
            await reply.read(limit=100_000)
        await asyncio.sleep(0.1)
    assert written < 16 * (1 << 20), "the upstream was hung up on, not read to its end"


async def test_a_compressed_reply_is_bounded_by_its_decoded_size(client: HttpClient) -> None:
    compressor = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
    bomb = b"".join(compressor.compress(bytes(1 << 20)) for _ in range(100)) + compressor.flush()
    assert len(bomb) < 200_000  # 100 MiB of zeros
    reply_bytes = keep_alive_reply(bomb, b"Content-Encoding: gzip\r\n")
    async with RawServer.answering(reply_bytes) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"", connect_timeout=2.0, read_timeout=5.0)
        with pytest.raises(ReplyTooLarge):
            await reply.read(limit=3 * (1 << 20))


async def test_a_reply_within_the_limit_is_read_whole(client: HttpClient) -> None:
    async with RawServer.answering(keep_alive_reply(b"x" * 1000)) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"", connect_timeout=2.0, read_timeout=5.0)
        assert await reply.read(limit=1000) == b"x" * 1000
