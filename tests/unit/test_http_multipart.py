"""Uploads: a multipart body streamed from a file, as fast as the upstream takes it."""

from __future__ import annotations

import asyncio
import io
import tempfile
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web

from parley.http import HttpClient, prepare
from parley.http.multipart import PIECE_BYTES, FilePart, MultipartBody
from tests.unit.test_http_client import RawServer, keep_alive_reply

BIG = 96 * 1024 * 1024
"""Far more than loopback socket buffers hold, so an unthrottled writer would run ahead."""


class CountingBody:
    """A ``MultipartBody`` that counts the bytes it has produced."""

    def __init__(self, body: MultipartBody) -> None:
        self.body = body
        self.produced = 0

    @property
    def length(self) -> int:
        return self.body.length

    def pieces(self) -> Iterator[bytes]:
        for piece in self.body.pieces():
            self.produced += len(piece)
            yield piece


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    http = HttpClient()
    yield http
    await http.close()


def upload(data: bytes | None = None, size: int = 0) -> MultipartBody:
    file = tempfile.SpooledTemporaryFile(max_size=1024 * 1024)  # noqa: SIM115 (the test owns it)
    if data is not None:
        file.write(data)
    else:
        file.truncate(size)
    part = FilePart("file", 'a "quoted"\r\nname.wav', "audio/wav", file)
    return MultipartBody([("model", "whisper-1"), ("timestamp_granularities[]", "word")], part)


async def test_an_aiohttp_server_reads_the_fields_and_the_file(client: HttpClient) -> None:
    received: dict[str, object] = {}

    async def handle(request: web.Request) -> web.Response:
        form = await request.post()
        for name, value in form.items():
            received[name] = value.file.read() if isinstance(value, web.FileField) else value
            if isinstance(value, web.FileField):
                received["filename"], received["type"] = value.filename, value.content_type
        return web.Response(text="ok")

    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/v1/upload", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        data = bytes(range(256)) * 12_000  # several pieces
        body = upload(data)
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1/upload"
        request = prepare("POST", url, {"Content-Type": body.content_type})
        reply = await client.send(request, body, connect_timeout=2, read_timeout=5)
        assert (reply.status, await reply.read()) == (200, b"ok")
    finally:
        await runner.cleanup()
    assert received["model"] == "whisper-1"
    assert received["timestamp_granularities[]"] == "word"
    assert received["filename"] == "a %22quoted%22%0D%0Aname.wav"
    assert received["type"] == "audio/wav"
    assert received["file"] == data


def test_the_length_is_known_before_the_first_byte_and_pieces_restart() -> None:
    body = upload(b"x" * (PIECE_BYTES * 2 + 5))
    first = b"".join(body.pieces())
    assert len(first) == body.length
    assert b"".join(body.pieces()) == first, "a resend starts from the beginning"
    assert max(len(piece) for piece in body.pieces()) <= PIECE_BYTES


async def test_the_file_is_read_only_as_fast_as_the_upstream_takes_it(client: HttpClient) -> None:
    body = CountingBody(upload(size=BIG))
    seen_while_reading: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(1024 * 1024)
        seen_while_reading.append(body.produced)
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        left = length - 1024 * 1024
        while left:
            left -= len(await reader.read(min(left, 1 << 20)))
        writer.write(keep_alive_reply(b"done"))

    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {"Content-Type": body.body.content_type})
        reply = await client.send(request, body, connect_timeout=2, read_timeout=10)
        assert await reply.read() == b"done"
    assert body.produced == body.length
    assert seen_while_reading[0] < BIG // 2, "the client ran ahead of the upstream"


async def test_an_upstream_that_answers_early_is_heard_and_the_rest_not_sent(
    client: HttpClient,
) -> None:
    body = CountingBody(upload(size=BIG))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        refusal = b'{"error": "too large"}'
        writer.write(
            b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: %d\r\n\r\n%s"
            % (len(refusal), refusal)
        )
        await writer.drain()
        await reader.read(1 << 20)  # keeps the connection open, reading a little

    async with RawServer(handler) as server:
        request = prepare("POST", server.url, {"Content-Type": body.body.content_type})
        reply = await client.send(request, body, connect_timeout=2, read_timeout=10)
        assert reply.status == 413
        assert await reply.read() == b'{"error": "too large"}'
    assert body.produced < BIG // 2
    assert server.connections == 1


def test_a_file_that_shrinks_while_sent_is_an_error() -> None:
    body = upload(b"y" * 100)
    pieces = body.pieces()
    next(pieces)
    body._files[0][1].truncate(10)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="shorter"):
        list(pieces)


def test_a_bytes_io_works_as_the_file() -> None:
    # The boundary is hex, so the payload holds letters it never does.
    part = FilePart("file", "a.wav", "audio/wav", io.BytesIO(b"wxyz"))
    body = MultipartBody([], part)
    whole = b"".join(body.pieces())
    assert len(whole) == body.length
    assert whole.count(b"wxyz") == 1
    assert whole.endswith(b"\r\n\r\nwxyz\r\n--" + body.boundary.encode() + b"--\r\n")


def test_several_files_go_in_order_each_with_its_part_head() -> None:
    first = FilePart("image[]", "a.png", "image/png", io.BytesIO(b"first-bytes"))
    second = FilePart("image[]", "b.png", "image/png", io.BytesIO(b"second"))
    mask = FilePart("mask", "mask.png", "image/png", io.BytesIO(b"mask!"))
    body = MultipartBody([("prompt", "a cat")], first, second, mask)
    whole = b"".join(body.pieces())
    assert len(whole) == body.length
    boundary = body.boundary.encode()
    parts = whole.split(b"--" + boundary)
    assert parts[0] == b"" and parts[-1] == b"--\r\n"
    assert b'name="prompt"\r\n\r\na cat\r\n' in parts[1]
    assert parts[2].endswith(b"\r\n\r\nfirst-bytes\r\n")
    assert b'name="image[]"; filename="b.png"' in parts[3]
    assert parts[4].endswith(b"Content-Type: image/png\r\n\r\nmask!\r\n")
