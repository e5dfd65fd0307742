"""A lean HTTP/1.1 client for upstream calls: keep-alive pools per origin, nothing else.

Why not ``aiohttp.ClientSession``: measured on the same upstream, one call cost about
125 µs of CPU through it and about 40 µs through this client (``bench/README.md``), and
an upstream call is on every request's path. What this client leaves out is what a
gateway does not need: cookies (one session would leak them between groups), redirects
(a channel's URL is configured, and following one would carry its key elsewhere),
and proxies from the environment. A request body is bytes already in memory, or a
``StreamedBody`` of known length (an upload read from a file, ``multipart``) written as
the socket drains, so a large upload is never copied whole into memory.

A request head is rendered once per channel and endpoint (``prepare``); each call adds
the body's length and the body. A reused connection that the upstream closed while idle
is detected before a byte of the reply arrives, and the request is sent once more on a
new connection: the upstream never saw it.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from yarl import URL

from parley.http.connection import Connection
from parley.http.errors import ConnectFailed, ConnectTimeout, Disconnected

KEEPALIVE_SECONDS = 15.0
MAX_IDLE_PER_ORIGIN = 256
USER_AGENT = "parley"

Origin = tuple[str, str, int]


class StreamedBody(Protocol):
    """A request body of known length, produced in pieces (restartable: each call of
    ``pieces`` starts from the beginning)."""

    @property
    def length(self) -> int: ...

    def pieces(self) -> Iterable[bytes]: ...


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request rendered up to its ``Content-Length`` value, and where it goes."""

    origin: Origin
    head: bytes


def prepare(method: str, url: str, headers: Mapping[str, str]) -> Prepared:
    """Render a request's head; a header value holding a line break is refused."""
    parsed = URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.raw_host:
        raise ValueError("an upstream URL must be http:// or https:// with a host")
    lines = [
        f"{method} {parsed.raw_path_qs or '/'} HTTP/1.1",
        f"Host: {parsed.host_port_subcomponent}",
        f"User-Agent: {USER_AGENT}",
        "Accept-Encoding: identity",
    ]
    for name, value in headers.items():
        if any(mark in name + value for mark in "\r\n\0"):
            raise ValueError(f"the header `{name}` holds a line break")
        lines.append(f"{name}: {value}")
    head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return Prepared((parsed.scheme, parsed.raw_host, port), head)


class Reply:
    """An upstream's reply once its head has arrived; the body is read from it.

    Finish with ``release()`` (the connection goes back to the pool when the body was
    read to its end, and is closed otherwise) or ``close()`` (always closed, which tells
    a streaming upstream to stop).
    """

    __slots__ = (
        "_client",
        "_connection",
        "_done",
        "_origin",
        "_read_timeout",
        "headers",
        "status",
    )

    def __init__(
        self, client: HttpClient, origin: Origin, connection: Connection, read_timeout: float
    ) -> None:
        self._client = client
        self._origin = origin
        self._connection = connection
        self._read_timeout = read_timeout
        self.status = connection.status
        self.headers = connection.headers
        self._done = False

    @property
    def content_type(self) -> str:
        """The media type, lower case, without parameters (``""`` when not given)."""
        value = self.headers.get(b"content-type", b"")
        return value.split(b";", 1)[0].strip().lower().decode("latin-1")

    @property
    def buffered(self) -> int:
        """Bytes of the body that arrived and wait to be read."""
        return self._connection.buffered

    @property
    def finished(self) -> bool:
        """The body has arrived in full (and ``pieces`` has nothing more to give)."""
        return self._connection.drained

    async def read(self) -> bytes:
        """The whole body; the connection is released (closed if the read failed)."""
        try:
            pieces = [piece async for piece in self.pieces()]
        finally:
            self.release()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body as it arrives: all that came since the last piece, never empty."""
        connection, timeout = self._connection, self._read_timeout
        while True:
            piece = await connection.next_piece(timeout)
            if not piece:
                return
            yield piece

    def release(self) -> None:
        """Done with the reply: a connection whose reply was read to its end goes back to
        the pool, any other is closed (so a streaming upstream stops). Only the first of
        ``release`` and ``close`` counts."""
        if self._done:
            return
        self._done = True
        if self._connection.reusable:
            self._client.park(self._origin, self._connection)
        else:
            self._connection.close()

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._connection.close()


class HttpClient:
    """Keep-alive connections per origin, shared by every adapter of one process."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        """``tls`` verifies https upstreams; by default the system's trusted CAs (which
        ``SSL_CERT_FILE`` can point elsewhere, for a private CA)."""
        self._idle: dict[Origin, list[Connection]] = {}
        self._tls = tls
        self._closed = False

    async def send(
        self,
        request: Prepared,
        body: bytes | StreamedBody,
        *,
        connect_timeout: float,
        read_timeout: float,
    ) -> Reply:
        """Send a prepared request with ``body``; returns once the reply's head arrived."""
        for attempt in (1, 2):
            connection = await self._acquire(request.origin, connect_timeout)
            try:
                if isinstance(body, bytes):  # written without joining
                    connection.send((request.head, b"%d\r\n\r\n" % len(body), body))
                else:
                    await _send_streamed(connection, request.head, body, read_timeout)
                await connection.wait_headers(read_timeout)
            except Disconnected:
                connection.close()
                if attempt == 1 and connection.reused and connection.received == 0:
                    continue  # closed by the upstream while idle: it never saw the request
                raise
            except BaseException:
                connection.close()
                raise
            return Reply(self, request.origin, connection, read_timeout)
        raise AssertionError("unreachable")  # pragma: no cover

    def park(self, origin: Origin, connection: Connection) -> None:
        idle = self._idle.setdefault(origin, [])
        if self._closed or len(idle) >= MAX_IDLE_PER_ORIGIN:
            connection.close()
            return
        connection.park()
        idle.append(connection)

    async def close(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()

    async def _acquire(self, origin: Origin, connect_timeout: float) -> Connection:
        idle = self._idle.get(origin)
        if idle:
            expired = time.monotonic() - KEEPALIVE_SECONDS
            while idle:
                connection = idle.pop()
                if not connection.closed and connection.idle_since > expired:
                    return connection
                connection.close()
        return await self._connect(origin, connect_timeout)

    async def _connect(self, origin: Origin, connect_timeout: float) -> Connection:
        scheme, host, port = origin
        tls = self._tls_context() if scheme == "https" else None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(connect_timeout):
                _, connection = await loop.create_connection(
                    Connection, host, port, ssl=tls, server_hostname=host if tls else None
                )
        except TimeoutError:
            raise ConnectTimeout("the upstream did not accept a connection in time") from None
        except (OSError, ssl.SSLError) as error:
            raise ConnectFailed(f"the upstream is unreachable ({type(error).__name__})") from None
        return connection

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls


async def _send_streamed(
    connection: Connection, head: bytes, body: StreamedBody, read_timeout: float
) -> None:
    """Write ``body`` piece by piece, each once the socket has taken the last. An upstream
    that answers before taking it all (a 413, a 401) is listened to: the rest is not sent
    and the connection is not reused."""
    connection.send((head, b"%d\r\n\r\n" % body.length))
    for piece in body.pieces():
        if connection.answered:
            connection.forgo_reuse()
            return
        connection.write(piece)
        await connection.drain(read_timeout)
