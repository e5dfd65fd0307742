"""HTTP/1.1 conformance of the upstream client, byte for byte against raw socket servers.

In the spirit of h11's and httpcore's suites: every way RFC 9112 frames a reply (length,
chunks, the connection's end, no body at all), what may surround one (interim replies,
trailers, chunk extensions), and what a broken or hostile upstream may send (pipelined
bytes after the reply, bodies cut or reset midway, invalid or folded headers, conflicting
lengths, bodies that do not decode). Each test says what the client must do, and whether
the connection may carry the next call (``server.connections`` counts them).
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator

import pytest

from parley.http import BrokenReply, Disconnected, HttpClient, ReadTimeout, prepare
from tests.http.rawserver import RawServer, keep_alive_reply, reset

OK_HEAD = b"HTTP/1.1 200 OK\r\n"


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    http = HttpClient()
    yield http
    await http.close()


async def fetch(
    client: HttpClient, server: RawServer, method: str = "POST", read_timeout: float = 5.0
) -> tuple[int, dict[bytes, bytes], bytes]:
    request = prepare(method, server.url, {})
    reply = await client.send(request, b"{}", connect_timeout=2.0, read_timeout=read_timeout)
    return reply.status, dict(reply.headers), await reply.read()


async def body_twice(client: HttpClient, server: RawServer) -> list[bytes]:
    return [(await fetch(client, server))[2] for _ in range(2)]


# Framing: Content-Length


async def test_a_length_framed_body_and_the_connection_is_reused(client: HttpClient) -> None:
    async with RawServer.keeping_alive(keep_alive_reply(b"hello")) as server:
        assert await body_twice(client, server) == [b"hello", b"hello"]
    assert server.connections == 1


async def test_an_empty_length_framed_body(client: HttpClient) -> None:
    async with RawServer.keeping_alive(keep_alive_reply(b"")) as server:
        assert await body_twice(client, server) == [b"", b""]
    assert server.connections == 1


async def test_a_reply_trickled_one_byte_at_a_time(client: HttpClient) -> None:
    reply = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
        b"4;ext=1\r\nslow\r\n6\r\n trick\r\n2\r\nle\r\n0\r\nX-Checksum: 1\r\n\r\n"
    )

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            for index in range(len(reply)):
                writer.write(reply[index : index + 1])
                await writer.drain()
                await asyncio.sleep(0)

    async with RawServer(handler) as server:
        status, headers, body = await fetch(client, server)
        assert (status, headers[b"content-type"], body) == (200, b"text/plain", b"slow trickle")
        assert (await fetch(client, server))[2] == b"slow trickle"
    assert server.connections == 1


# Framing: chunks


async def test_chunk_extensions_are_ignored(client: HttpClient) -> None:
    chunked = b'5;name=value\r\nhello\r\n6;a;b="q"\r\n world\r\n0;last\r\n\r\n'
    reply = OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked
    async with RawServer.keeping_alive(reply) as server:
        assert await body_twice(client, server) == [b"hello world"] * 2
    assert server.connections == 1


async def test_hex_chunk_sizes_in_either_case(client: HttpClient) -> None:
    reply = (
        OK_HEAD
        + b"Transfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\nb\r\nabcdefghijk\r\n0\r\n\r\n"
    )
    async with RawServer.answering(reply) as server:
        assert (await fetch(client, server))[2] == b"0123456789abcdefghijk"


async def test_trailers_end_the_body_and_are_not_headers(client: HttpClient) -> None:
    reply = (
        OK_HEAD + b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
        b"2\r\n{}\r\n0\r\nContent-Type: text/evil\r\nX-Trailer: yes\r\n\r\n"
    )
    async with RawServer.keeping_alive(reply) as server:
        status, headers, body = await fetch(client, server)
        assert (await fetch(client, server))[2] == b"{}"
    assert (status, body) == (200, b"{}")
    assert headers[b"content-type"] == b"application/json"
    assert b"x-trailer" not in headers
    assert server.connections == 1, "a reply with trailers leaves the connection reusable"


async def test_transfer_encoding_is_case_insensitive(client: HttpClient) -> None:
    reply = OK_HEAD + b"transfer-encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    async with RawServer.answering(reply) as server:
        assert (await fetch(client, server))[2] == b"abc"


@pytest.mark.parametrize("coding", [b"gzip, chunked", b"chunked, gzip", b"identity", b"compress"])
async def test_a_transfer_coding_other_than_chunked_is_broken(
    client: HttpClient, coding: bytes
) -> None:
    reply = OK_HEAD + b"Transfer-Encoding: " + coding + b"\r\n\r\n0\r\n\r\n"
    async with RawServer.answering(reply) as server:
        with pytest.raises(BrokenReply):
            await fetch(client, server)


# Interim replies


@pytest.mark.parametrize(
    "interim",
    [
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
        b"HTTP/1.1 103 Early Hints\r\n\r\n",
    ],
)
async def test_interim_replies_are_skipped_for_the_final_one(
    client: HttpClient, interim: bytes
) -> None:
    async with RawServer.keeping_alive(interim + keep_alive_reply(b"final")) as server:
        status, headers, body = await fetch(client, server)
        assert (await fetch(client, server))[2] == b"final"
    assert (status, body) == (200, b"final")
    assert b"link" not in headers
    assert server.connections == 1


async def test_switching_protocols_unasked_is_broken(client: HttpClient) -> None:
    reply = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    async with RawServer.answering(reply + b"\x81\x00") as server:
        with pytest.raises(BrokenReply):
            await fetch(client, server)


# Replies without a body


async def test_the_reply_to_head_has_no_body_whatever_its_length(client: HttpClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await server.read_request(reader)
            if request.startswith(b"HEAD "):
                writer.write(OK_HEAD + b"Content-Length: 1000\r\nX-Kind: head\r\n\r\n")
            else:
                writer.write(keep_alive_reply(b"after head"))

    async with RawServer(handler) as server:
        status, headers, body = await fetch(client, server, "HEAD")
        assert (status, headers[b"x-kind"], body) == (200, b"head", b"")
        assert (await fetch(client, server))[2] == b"after head"
    assert server.connections == 1


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n",
        b'HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\nETag: "x"\r\n\r\n',
        b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
)
async def test_204_and_304_have_no_body_and_keep_the_connection(
    client: HttpClient, head: bytes
) -> None:
    async with RawServer.keeping_alive(head, keep_alive_reply(b"next")) as server:
        status, _, body = await fetch(client, server)
        assert body == b""
        assert status in (204, 304)
        assert (await fetch(client, server))[2] == b"next"
    assert server.connections == 1


# Bodies ended by closing the connection


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.0 200 OK\r\n\r\nold style",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nold style",
        b"HTTP/1.1 200 OK\r\n\r\nold style",
    ],
)
async def test_a_body_ended_by_the_connection(client: HttpClient, reply: bytes) -> None:
    async with RawServer.answering(reply) as server:
        assert await body_twice(client, server) == [b"old style"] * 2
    assert server.connections == 2


async def test_a_close_delimited_body_ended_by_a_reset_is_disconnected(
    client: HttpClient,
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\npartial")
        await writer.drain()
        await asyncio.sleep(0.05)
        reset(writer)

    async with RawServer(handler) as server:
        with pytest.raises(Disconnected):
            await fetch(client, server)


async def test_http_1_0_keep_alive_is_honoured(client: HttpClient) -> None:
    reply = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"
    async with RawServer.keeping_alive(reply) as server:
        assert await body_twice(client, server) == [b"ok", b"ok"]
    assert server.connections == 1


async def test_connection_close_with_a_length_is_not_reused(client: HttpClient) -> None:
    reply = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
    async with RawServer.keeping_alive(reply) as server:
        assert await body_twice(client, server) == [b"ok", b"ok"]
    assert server.connections == 2


# Bytes after the reply


@pytest.mark.parametrize(
    "garbage",
    [
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\nextra",
        b"extra",
        b"\x00\xff garbage",
    ],
)
async def test_bytes_after_a_whole_reply_in_the_same_read_are_dropped(
    client: HttpClient, garbage: bytes
) -> None:
    async with RawServer.answering(keep_alive_reply(b"ok") + garbage) as server:
        assert await fetch(client, server) == (200, {b"content-length": b"2"}, b"ok")
        assert (await fetch(client, server))[2] == b"ok"
    assert server.connections == 2, "the connection that carried them is not reused"


async def test_bytes_after_a_whole_reply_in_a_later_read_are_dropped(
    client: HttpClient,
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(keep_alive_reply(b"ok"))
        await writer.drain()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nstolen")
        await writer.drain()
        await server.read_request(reader)
        writer.write(keep_alive_reply(b"late"))

    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"{}", connect_timeout=2.0, read_timeout=5.0)
        await asyncio.sleep(0.05)  # the pipelined reply arrives while this one is unread
        assert await reply.read() == b"ok"
        assert (await fetch(client, server))[2] == b"ok"
    assert server.connections == 2


async def test_a_stray_line_end_after_a_reply_is_tolerated(client: HttpClient) -> None:
    async with RawServer.keeping_alive(keep_alive_reply(b"ok") + b"\r\n") as server:
        assert (await fetch(client, server))[2] == b"ok"


# Bodies cut short


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        b"HTTP/1.1 200 OK\r\nContent-Le",
        b"",
    ],
)
async def test_a_reply_cut_by_closing_is_disconnected(client: HttpClient, reply: bytes) -> None:
    async with RawServer.answering(reply) as server:
        with pytest.raises(Disconnected):
            await fetch(client, server)


async def test_a_reset_mid_body_is_disconnected_after_what_arrived(client: HttpClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await arrived.wait()
        reset(writer)

    arrived = asyncio.Event()
    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"{}", connect_timeout=2.0, read_timeout=5.0)
        pieces = reply.pieces()
        assert await anext(pieces) == b"first"
        arrived.set()
        with pytest.raises(Disconnected):
            await anext(pieces)
        reply.close()


async def test_a_trickle_that_stops_is_a_read_timeout(client: HttpClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")
        await writer.drain()
        await asyncio.sleep(5)

    async with RawServer(handler) as server:
        with pytest.raises(ReadTimeout):
            await fetch(client, server, read_timeout=0.1)


async def test_the_read_timeout_is_each_silence_not_the_whole_body(client: HttpClient) -> None:
    """Pieces that each come within the read timeout make a body that lasts longer than
    it, and the silence after the last of them still times out: one timer watches a
    body's silences, and each wait counts from its own start."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(OK_HEAD + b"Content-Length: 10\r\n\r\n")
        for _ in range(6):
            writer.write(b"a")
            await writer.drain()
            await asyncio.sleep(0.25)
        await asyncio.sleep(5)

    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"{}", connect_timeout=2.0, read_timeout=1.0)
        received = b""
        with pytest.raises(ReadTimeout):
            async for piece in reply.pieces():
                received += piece
        reply.close()
    assert received == b"aaaaaa"


# Invalid heads


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(
            b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 0\r\n\r\n", id="fold"
        ),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-Bad : a\r\nContent-Length: 0\r\n\r\n", id="space"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX-Bad: a\x00b\r\nContent-Length: 0\r\n\r\n", id="nul"),
        pytest.param(b"HTTP/1.1 200 OK\r\nX Bad: a\r\nContent-Length: 0\r\n\r\n", id="name"),
        pytest.param(b"HTTP/1.1 200 OK\r\nno colon\r\nContent-Length: 0\r\n\r\n", id="colon"),
        pytest.param(b"HTTP/1.1 200 OK\nContent-Length: 0\n\n", id="bare-lf"),
        pytest.param(b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n", id="status"),
        pytest.param(b"HTTP/9.9 200 OK\r\nContent-Length: 0\r\n\r\n", id="version"),
        pytest.param(b"ICY 200 OK\r\nContent-Length: 0\r\n\r\n", id="protocol"),
        pytest.param(b"SSH-2.0-OpenSSH_9.2\r\n\r\n", id="not-http"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", id="two-lengths"
        ),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok", id="negative"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nok", id="not-a-number"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2\r\nok\r\n0\r\n\r\n",
            id="length-and-chunks",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", id="chunk-size"
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX", id="chunk-end"
        ),
    ],
)
async def test_an_invalid_reply_is_broken(client: HttpClient, head: bytes) -> None:
    async with RawServer.answering(head) as server:
        with pytest.raises(BrokenReply):
            await fetch(client, server)


# Content codings


async def test_gzip_deflate_and_raw_deflate_are_decoded(client: HttpClient) -> None:
    text = b"the quick brown fox " * 500
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    bodies = [
        (b"gzip", gzip.compress(text)),
        (b"x-gzip", gzip.compress(text)),
        (b"deflate", zlib.compress(text)),
        (b"deflate", raw.compress(text) + raw.flush()),
        (b"gzip", gzip.compress(text[:5000]) + gzip.compress(text[5000:])),  # two members
    ]
    for encoding, body in bodies:
        reply = keep_alive_reply(body, b"Content-Encoding: " + encoding + b"\r\n")
        async with RawServer.answering(reply) as server:
            assert (await fetch(client, server))[2] == text, encoding


async def test_a_big_compressed_body_is_decoded_in_bounded_pieces(client: HttpClient) -> None:
    size = 5 * (1 << 20) + 17
    body = gzip.compress(b"z" * size)
    reply = keep_alive_reply(body, b"Content-Encoding: gzip\r\n")
    async with RawServer.answering(reply) as server:
        request = prepare("POST", server.url, {})
        answer = await client.send(request, b"{}", connect_timeout=2.0, read_timeout=5.0)
        sizes = [len(piece) async for piece in answer.pieces()]
        answer.release()
    assert sum(sizes) == size
    assert max(sizes) <= 1 << 20


async def test_a_chunked_gzip_stream_is_decoded_as_it_arrives(client: HttpClient) -> None:
    compressor = zlib.compressobj(wbits=zlib.MAX_WBITS | 16)
    first = compressor.compress(b"data: one\n\n") + compressor.flush(zlib.Z_SYNC_FLUSH)
    last = compressor.compress(b"data: two\n\n") + compressor.flush()
    sent = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        writer.write(head + b"%x\r\n%s\r\n" % (len(first), first))
        await writer.drain()
        await sent.wait()
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(last), last))

    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {})
        reply = await client.send(request, b"{}", connect_timeout=2.0, read_timeout=5.0)
        pieces = reply.pieces()
        assert await anext(pieces) == b"data: one\n\n"
        sent.set()
        assert [piece async for piece in pieces] == [b"data: two\n\n"]
        assert reply.finished
        reply.release()


def _corrupt_last_chunk(body: bytes) -> bytes:
    return body[:-20] + bytes(b ^ 0x55 for b in body[-20:-8]) + body[-8:]


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        pytest.param(b"gzip", b"not gzip at all", id="not-gzip"),
        pytest.param(b"gzip", gzip.compress(bytes(range(256)) * 40)[:-30], id="gzip-cut-short"),
        pytest.param(
            b"gzip",
            _corrupt_last_chunk(gzip.compress(bytes(range(256)) * 40)),
            id="gzip-corrupt-end",
        ),
        pytest.param(b"gzip", gzip.compress(b"ok")[:-4] + b"\0\0\0\0", id="gzip-bad-length"),
        pytest.param(b"deflate", zlib.compress(b"x" * 1000)[:-3], id="deflate-cut-short"),
        pytest.param(b"gzip", gzip.compress(b"ok") + b"trailing junk", id="gzip-trailing-junk"),
        pytest.param(b"zstd", b"(\xb5/\xfd", id="unsupported"),
    ],
)
async def test_a_body_that_does_not_decode_raises_never_ends_quietly(
    client: HttpClient, encoding: bytes, body: bytes
) -> None:
    chunks = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    head = OK_HEAD + b"Content-Encoding: " + encoding + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    async with RawServer.answering(head + chunked) as server:
        with pytest.raises(BrokenReply):
            await fetch(client, server)
