"""A lean HTTP/1.1 keep-alive client for the load generator: one asyncio protocol per
connection, the request sent as precomputed bytes, the reply parsed just enough to know
where it ends (``Content-Length`` or ``Transfer-Encoding: chunked``).

It exists because on a two-core machine the generator competes with the server under test
for CPU: this client spends a fraction of what ``aiohttp.ClientSession`` does per request,
so more of the machine measures the server. It understands only what the benchmark needs:
no redirects, no compression, no pipelining, no trailers.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit


class ProtocolError(Exception):
    """The server's reply could not be parsed, or the connection ended mid-reply."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes


def request_bytes(url: str, body: bytes, headers: dict[str, str]) -> tuple[str, int, bytes]:
    """(host, port, the whole POST request) for ``url``."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    lines = [f"POST {parts.path or '/'} HTTP/1.1", f"Host: {host}:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return host, port, head + body


class ReplyReader(asyncio.Protocol):
    """Collects one reply at a time into ``waiter``."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[Reply] | None = None
        self.closed = False
        self.first_byte = 0.0
        """When the current reply's first byte arrived (``time.perf_counter``), or 0."""
        self._buffer = bytearray()
        self._reset()

    def _reset(self) -> None:
        self._status = 0
        self._head_end = -1
        self._length = -1
        self._chunked = False
        self._position = 0
        self._pieces: list[bytes] = []
        self._keep_alive = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ProtocolError(f"connection lost mid-reply ({exc})"))

    def send(self, request: bytes) -> asyncio.Future[Reply]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.first_byte = 0.0
        self.transport.write(request)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        if not self.first_byte:
            self.first_byte = time.perf_counter()
        self._buffer += data
        try:
            done = self._parse()
        except (ValueError, ProtocolError) as error:
            self._fail(ProtocolError(f"bad reply: {error}"))
            return
        if done is not None and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(done)

    def _fail(self, error: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(error)
        if self.transport is not None:
            self.transport.close()

    def _parse(self) -> Reply | None:
        if self._head_end < 0 and not self._parse_head():
            return None
        body = self._parse_chunks() if self._chunked else self._parse_sized()
        if body is None:
            return None
        reply = Reply(self._status, body)
        if not self._keep_alive and self.transport is not None:
            self.transport.close()
        self._reset()
        return reply

    def _parse_head(self) -> bool:
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        head = bytes(self._buffer[:end]).lower()
        self._status = int(head[9:12])
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            value = value.strip()
            if name == b"content-length":
                self._length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value:
                self._chunked = True
            elif name == b"connection" and value == b"close":
                self._keep_alive = False
        if self._length < 0 and not self._chunked:
            raise ProtocolError("reply has neither Content-Length nor chunked encoding")
        self._head_end = self._position = end + 4
        return True

    def _parse_sized(self) -> bytes | None:
        end = self._head_end + self._length
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[self._head_end : end])
        del self._buffer[:end]
        return body

    def _parse_chunks(self) -> bytes | None:
        buffer = self._buffer
        while True:
            line_end = buffer.find(b"\r\n", self._position)
            if line_end < 0:
                return None
            size = int(bytes(buffer[self._position : line_end]).split(b";")[0], 16)
            data_end = line_end + 2 + size
            if len(buffer) < data_end + 2:
                return None
            if size == 0:
                del buffer[: data_end + 2]
                return b"".join(self._pieces)
            self._pieces.append(bytes(buffer[line_end + 2 : data_end]))
            self._position = data_end + 2


class Connection:
    """One keep-alive connection that reconnects when the server closes it."""

    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._reader: ReplyReader | None = None

    async def post(self, request: bytes) -> Reply:
        if self._reader is None or self._reader.closed:
            loop = asyncio.get_running_loop()
            _, self._reader = await loop.create_connection(ReplyReader, self._host, self._port)
        try:
            return await self._reader.send(request)
        except BaseException:
            self.close()
            raise

    @property
    def first_byte(self) -> float:
        """When the last reply's first byte arrived (``time.perf_counter``), or 0."""
        return self._reader.first_byte if self._reader is not None else 0.0

    def close(self) -> None:
        if self._reader is not None and self._reader.transport is not None:
            self._reader.transport.close()
        self._reader = None
