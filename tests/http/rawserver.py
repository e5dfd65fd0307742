"""Raw socket servers for the upstream client's tests: they write exactly the bytes under test.

``RawServer`` is an asyncio TCP server on 127.0.0.1 in the test's own loop, handing each
connection to a handler. ``ThreadServer`` runs a blocking socket server in a thread, for
the cases where the client's event loop must not run while the server acts (a close the
kernel has seen and the loop has not).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """A TCP server on 127.0.0.1 that hands each connection to ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self._server = await asyncio.start_server(serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    @classmethod
    def answering(cls, reply: bytes) -> RawServer:
        """A server that answers the first request of each connection with ``reply``."""

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            writer.write(reply)

        server = cls(handler)
        return server

    @classmethod
    def keeping_alive(cls, *replies: bytes) -> RawServer:
        """A server that answers each request on a connection with the next of ``replies``
        (the last one over and over), keeping the connection open."""

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            index = 0
            while True:
                await server.read_request(reader)
                writer.write(replies[min(index, len(replies) - 1)])
                await writer.drain()
                index += 1

        server = cls(handler)
        return server

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        request = head + await reader.readexactly(content_length(head))
        self.requests.append(request)
        return request


def content_length(head: bytes) -> int:
    return next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )


class HeadFlood:
    """A server whose reply head is ``lines`` headers of ``size`` bytes each (each of its
    own name), written one at a time, then a length and a body (``body``); ``written``
    counts the lines that reached the socket before the client hung up."""

    def __init__(self, lines: int, size: int, body: bytes = b"{}") -> None:
        self.written = 0
        self.server = RawServer(self._handle)
        self._lines, self._size, self._body = lines, size, body

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n")
        value = b"a" * self._size
        for number in range(self._lines):
            writer.write(b"X-Pad-%d: %s\r\n" % (number, value))
            await writer.drain()
            self.written += 1
        writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(self._body), self._body))
        await writer.drain()


def reset(writer: asyncio.StreamWriter) -> None:
    """Close the connection with a TCP reset rather than an orderly end."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def keep_alive_reply(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


ThreadHandler = Callable[[socket.socket, "ThreadServer"], None]


class ThreadServer:
    """A blocking server in a thread, one connection at a time, each given to ``handler``."""

    def __init__(self, handler: ThreadHandler) -> None:
        self.handler = handler
        self.requests: list[bytes] = []
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> ThreadServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread's accept()
        self._listener.close()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def read_request(self, sock: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        while len(body) < content_length(head):
            body += sock.recv(65536)
        self.requests.append(head + b"\r\n\r\n" + body)
        return head

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            with sock, contextlib.suppress(OSError):
                self.handler(sock, self)
