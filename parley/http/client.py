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
the body's length and the body.

**A request is written once.** An idle connection is checked before a request is
written on it (closed, expired, or its socket readable: an end of file, a reset or
unasked-for bytes), and a dead one is dropped for another: that request never left.
Once the request was handed to a socket it is never sent again, whatever happens next
(the upstream may have read it and be working on it: a paid call must not run twice),
and a connection that ends before the reply is a ``Disconnected``.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from yarl import URL

from parley.http.connection import Connection
from parley.http.errors import ConnectFailed, ConnectTimeout, PoolTimeout, ReplyTooLarge
from parley.http.parsing import DEFAULT_HEAD_LIMITS, HeadLimits
from parley.http.pool import Pool

KEEPALIVE_SECONDS = 15.0
KEEPALIVE_MARGIN = 1.0
"""Seconds before an upstream's own ``Keep-Alive: timeout`` that a connection is retired."""
MAX_IDLE_PER_ORIGIN = 256
MAX_CONNECTIONS_PER_ORIGIN = 1000
USER_AGENT = "parley"

Origin = tuple[str, str, int]


class StreamedBody(Protocol):
    """A request body of known length, produced in pieces."""

    @property
    def length(self) -> int: ...

    def pieces(self) -> Iterable[bytes]: ...


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request rendered up to its ``Content-Length`` value, and where it goes."""

    origin: Origin
    head: bytes
    bodiless: bool = False
    """The reply has no body whatever its headers say (a ``HEAD`` request)."""


def prepare(
    method: str, url: str, headers: Mapping[str, str], *, encoded: bool = False
) -> Prepared:
    """Render a request's head; a header value holding a line break is refused.
    ``encoded``: the URL's path is already percent-encoded and goes as it is (a signed
    request's path must be the one signed)."""
    parsed = URL(url, encoded=encoded)
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
    return Prepared((parsed.scheme, parsed.raw_host, port), head, method == "HEAD")


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
        "arrival",
        "headers",
        "piece_now",
        "read_timeout",
        "status",
    )

    def __init__(
        self, client: HttpClient, origin: Origin, connection: Connection, read_timeout: float
    ) -> None:
        self._client = client
        self._origin = origin
        self._connection = connection
        self.read_timeout = read_timeout
        """The longest silence while the body is read."""
        self.piece_now: Callable[[], bytes | None] = connection.piece_now
        """What arrived since the last piece (empty at the body's end), or ``None`` when
        nothing did yet: then await ``arrival(read_timeout)`` and ask again. ``next_piece``
        without its coroutine, for a reader that runs once per upstream read."""
        self.arrival: Callable[[float], Awaitable[None]] = connection.expect
        """Done when input arrives, failed after that many seconds of silence."""
        parser = connection.parser
        self.status = parser.status
        self.headers = parser.headers
        self._done = False

    @property
    def content_type(self) -> str:
        """The media type, lower case, without parameters (``""`` when not given)."""
        value = self.headers.get(b"content-type", b"")
        return value.split(b";", 1)[0].strip().lower().decode("latin-1")

    @property
    def buffered(self) -> int:
        """Bytes of the body that arrived and wait to be read."""
        return self._connection.parser.buffered

    @property
    def finished(self) -> bool:
        """The body has arrived in full (and ``pieces`` has nothing more to give)."""
        return self._connection.parser.drained

    async def read(self, limit: int | None = None) -> bytes:
        """The whole body; the connection is released (closed if the read failed).

        With a ``limit``, a body longer than ``limit`` bytes (decoded) raises
        ``ReplyTooLarge`` as soon as it is known: from its ``Content-Length``, or when
        the bytes read pass the limit, never buffering more than a piece beyond it.
        """
        connection = self._connection
        parser = connection.parser
        try:
            if limit is not None:
                declared = self.headers.get(b"content-length")
                if (
                    declared is not None
                    and b"content-encoding" not in self.headers
                    and int(declared) > limit
                ):
                    raise ReplyTooLarge(f"the reply is over {limit} bytes")
            if parser.complete and parser.decoder is None and parser.failure is None:
                body = connection.take_body()  # it came whole with its head: nothing to wait for
                if limit is not None and len(body) > limit:
                    raise ReplyTooLarge(f"the reply is over {limit} bytes")
                return body
            pieces: list[bytes] = []
            total = 0
            timeout = self.read_timeout
            while piece := await connection.next_piece(timeout):
                total += len(piece)
                if limit is not None and total > limit:
                    raise ReplyTooLarge(f"the reply is over {limit} bytes")
                pieces.append(piece)
        finally:
            self.release()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body as it arrives: all that came since the last piece, never empty."""
        connection, timeout = self._connection, self.read_timeout
        while True:
            piece = await connection.next_piece(timeout)
            if not piece:
                return
            yield piece

    def next_piece(self) -> Awaitable[bytes]:
        """What arrived since the last piece, waiting for some; empty at the body's end.
        ``pieces`` without its generator, for a reader that runs once per upstream read."""
        return self._connection.next_piece(self.read_timeout)

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
            self._client.discard(self._origin, self._connection)

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._client.discard(self._origin, self._connection)


class HttpClient:
    """Keep-alive connections per origin, shared by every adapter of one process."""

    def __init__(
        self,
        tls: ssl.SSLContext | None = None,
        *,
        max_per_origin: int = MAX_CONNECTIONS_PER_ORIGIN,
        keepalive_seconds: float = KEEPALIVE_SECONDS,
        head_limits: HeadLimits = DEFAULT_HEAD_LIMITS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``tls`` verifies https upstreams; by default the system's trusted CAs (which
        ``SSL_CERT_FILE`` can point elsewhere, for a private CA). At most
        ``max_per_origin`` connections are open to one origin; a call beyond them waits
        for one, within its connect timeout. An idle connection is kept
        ``keepalive_seconds``, or less when the upstream's ``Keep-Alive`` says so. A reply
        whose head passes ``head_limits`` fails with ``HeadTooLarge``."""
        self._pools: dict[Origin, Pool] = {}
        self._protocol = functools.partial(Connection, head_limits)
        self._tls = tls
        self._max_per_origin = max_per_origin
        self._keepalive = keepalive_seconds
        self._clock = clock
        self._closed = False
        self.extra_head: Callable[[], bytes] | None = None
        """Header lines (each ending ``\\r\\n``) added to every request's head as it is
        sent, or ``b""``: how tracing sends each attempt's ``traceparent`` without a
        change to any adapter's ``prepare``. ``None`` (the default) adds nothing."""

    async def send(
        self,
        request: Prepared,
        body: bytes | StreamedBody,
        *,
        connect_timeout: float,
        read_timeout: float,
    ) -> Reply:
        """Send a prepared request with ``body`` once; returns when the reply's head arrived."""
        origin = request.origin
        pool = self._pools.get(origin)
        connection = pool.take_idle(self._clock()) if pool is not None else None
        if connection is None:  # none idle: open one, or wait for one
            connection = await self._acquire(origin, connect_timeout)
        try:
            extra = self.extra_head
            if isinstance(body, bytes):  # written without joining
                if extra is None:
                    data = (request.head, b"%d\r\n\r\n" % len(body), body)
                else:
                    data = (request.head, b"%d\r\n%s\r\n" % (len(body), extra()), body)
                connection.send(data, bodiless=request.bodiless)
            else:
                end = b"\r\n\r\n" if extra is None else b"\r\n%s\r\n" % extra()
                await _send_streamed(connection, request, body, read_timeout, end)
            parser = connection.parser
            while not parser.headers_done:  # the head, awaited here: no coroutine of its own
                await connection.expect(read_timeout)
            if parser.failure is not None:
                raise parser.failure
        except BaseException:
            self.discard(origin, connection)
            raise
        return Reply(self, origin, connection, read_timeout)

    def park(self, origin: Origin, connection: Connection) -> None:
        """A connection whose reply was read whole: idle (or on to a waiting call)."""
        keepalive, hint = self._keepalive, connection.parser.keep_alive_hint
        if hint is not None:
            keepalive = min(keepalive, hint - KEEPALIVE_MARGIN)
        if self._closed or keepalive <= 0:
            self.discard(origin, connection)
            return
        now = self._clock()
        connection.park(now + keepalive)
        self._pools[origin].park(connection, now)

    def discard(self, origin: Origin, connection: Connection) -> None:
        """Close a connection that carried a call; its slot goes to a waiting call."""
        connection.close()
        self._pools[origin].free_slot()

    async def close(self) -> None:
        self._closed = True
        for pool in self._pools.values():
            pool.close(ConnectFailed("the upstream client is closed"))

    async def _acquire(self, origin: Origin, connect_timeout: float) -> Connection:
        if self._closed:
            raise ConnectFailed("the upstream client is closed")
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = Pool(self._clock, MAX_IDLE_PER_ORIGIN)
        if pool.claim(self._max_per_origin):
            return await self._connect_in_slot(origin, pool, connect_timeout)
        return await self._wait_for_slot(origin, pool, connect_timeout)

    async def _wait_for_slot(
        self, origin: Origin, pool: Pool, connect_timeout: float
    ) -> Connection:
        """Wait for a parked connection or a freed slot; both wait and connect together
        take at most ``connect_timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + connect_timeout
        try:
            handed = await pool.wait_for(deadline)
        except TimeoutError:
            raise PoolTimeout("no connection to the upstream was free in time") from None
        if handed is not None:
            return handed
        return await self._connect_in_slot(origin, pool, deadline - loop.time())

    async def _connect_in_slot(
        self, origin: Origin, pool: Pool, connect_timeout: float
    ) -> Connection:
        """Open a connection in a slot the pool counted (``claim``, or one handed over)."""
        try:
            return await self._connect(origin, connect_timeout)
        except BaseException:
            pool.free_slot()
            raise

    async def _connect(self, origin: Origin, connect_timeout: float) -> Connection:
        scheme, host, port = origin
        tls = self._tls_context() if scheme == "https" else None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(connect_timeout):
                _, connection = await loop.create_connection(
                    self._protocol, host, port, ssl=tls, server_hostname=host if tls else None
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
    connection: Connection,
    request: Prepared,
    body: StreamedBody,
    read_timeout: float,
    end: bytes,
) -> None:
    """Write ``body`` piece by piece, each once the socket has taken the last. An upstream
    that answers before taking it all (a 413, a 401) is listened to: the rest is not sent
    and the connection is not reused."""
    connection.send((request.head, b"%d%s" % (body.length, end)), bodiless=request.bodiless)
    for piece in body.pieces():
        if connection.parser.answered:
            connection.forgo_reuse()
            return
        connection.write(piece)
        await connection.drain(read_timeout)
