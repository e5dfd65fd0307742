"""One keep-alive HTTP/1.1 connection to an upstream: the socket's side of a reply.

What the bytes mean is the ``ReplyParser``'s (``parsing.py``, which does no I/O); this
protocol feeds it what arrives and does what only the socket's owner can: it pauses
reading while more than ``HIGH_WATER`` bytes of body wait unread, so a fast upstream and
a slow caller cannot fill memory; it waits for the reply's head and its body with one
timer watching the silences (the read timeout is each silence, not the whole body); it
closes the socket when the parser says it can carry nothing more; and it tells the pool
whether it may carry the next request (``reusable``, ``usable``). A compressed body is
decoded by the reader (``decoding``).
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Sequence
from typing import cast

from parley.http.decoding import BodyDecoder
from parley.http.errors import Disconnected, ReadTimeout
from parley.http.parsing import DEFAULT_HEAD_LIMITS, HeadLimits, ReplyParser

HIGH_WATER = 1 << 20


class Connection(asyncio.Protocol):
    """The protocol of one upstream socket; serves one request at a time."""

    __slots__ = (
        "__weakref__",
        "_limit",
        "_loop",
        "_paused",
        "_poller",
        "_silent_since",
        "_waiter",
        "_watch",
        "_watch_due",
        "_writable",
        "closed",
        "expires",
        "in_flight",
        "parser",
        "transport",
    )

    def __init__(self, limits: HeadLimits = DEFAULT_HEAD_LIMITS) -> None:
        self.parser = ReplyParser(limits)
        """The reply being read (or the last one)."""
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.in_flight = False
        self.expires = 0.0
        self._poller: select.poll | None = None
        """Polls this socket for input while idle (made once: one system call per check)."""
        self._loop = asyncio.get_running_loop()
        self._writable: asyncio.Future[None] | None = None
        self._watch: asyncio.TimerHandle | None = None
        """The silence watch (``expect``), while one is armed: one timer for every wait of
        every reply the connection carries, moved only when a wait must end sooner."""
        self._watch_due = 0.0
        self._silent_since = 0.0
        self._limit = 0.0
        """The read timeout of the wait in progress (or the last one)."""
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._poller = select.poll()
            self._poller.register(sock.fileno(), select.POLLIN)

    def data_received(self, data: bytes) -> None:
        parser = self.parser
        if not self.in_flight or not parser.feed(data):
            # Idle, nothing is owed (a 408, say); or the reply is broken, past its bounds,
            # or over: either way the connection is done for.
            self._wake()
            self.close()
            return
        if self._writable is not None and parser.answered:
            self.resume_writing()  # a body still being sent stops here: the upstream answered
        if parser.buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        waiter = self._waiter  # ``_wake``, written out: this runs once per upstream read
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def eof_received(self) -> bool:
        return False  # close the socket: this side has nothing more to send either

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.parser.end_of_input(clean=exc is None)
        self.resume_writing()
        self._wake()
        self._unwatch()
        # Break the cycle transport ↔ protocol (the parser broke its own with llhttp) so
        # a closed connection is freed at once, not by a full garbage collection much
        # later: with thousands of streams closing, that garbage pinned tens of MB.
        self.transport = None
        self._poller = None

    # used by Reply and the client

    def send(self, request: Sequence[bytes], *, bodiless: bool = False) -> None:
        self.parser.begin(bodiless)
        self._paused = False
        self._waiter = None
        if self.transport is None or self.transport.is_closing():
            raise Disconnected("the connection to the upstream is closed")
        self.in_flight = True
        self.transport.writelines(request)

    def write(self, data: bytes) -> None:
        """More of the request body ``send`` began."""
        if self.transport is None or self.transport.is_closing():
            raise Disconnected("the connection to the upstream is closed")
        self.transport.write(data)

    async def drain(self, read_timeout: float) -> None:
        """Wait until the socket takes more (at most ``read_timeout`` seconds)."""
        waiter = self._writable
        if waiter is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(waiter), read_timeout)
        except TimeoutError:
            raise ReadTimeout("the upstream stopped reading the request") from None

    def forgo_reuse(self) -> None:
        """The request was not sent whole: close the connection after this reply."""
        self.parser.forgo_reuse()

    def expect(self, read_timeout: float) -> asyncio.Future[None]:
        """A future done when input arrives (or the connection ends), failed with
        ``ReadTimeout`` after ``read_timeout`` seconds of silence. Raises at once what
        already failed the reply, and ``Disconnected`` on a closed connection.

        No timer is made per wait: the connection's silence watch, armed for the first
        wait, is moved only when this wait must end before it fires, and when it fires
        it expires the wait in progress if that wait has lasted its ``read_timeout``,
        else it is set again for when it would."""
        parser = self.parser
        if parser.failure is not None:
            raise parser.failure
        if self.closed:
            raise Disconnected("the upstream closed the connection")
        loop = self._loop
        self._waiter = waiter = loop.create_future()
        self._silent_since = since = loop.time()
        self._limit = read_timeout
        due = since + read_timeout
        watch = self._watch
        if watch is None or self._watch_due > due:
            if watch is not None:
                watch.cancel()
            self._watch = loop.call_at(due, self._silence)
            self._watch_due = due
        return waiter

    def take_body(self) -> bytes:
        """Everything buffered so far (empty once the body is complete and taken)."""
        body = self.parser.take()
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return body

    async def next_piece(self, read_timeout: float) -> bytes:
        """What arrived since the last call, waiting for some; empty at the body's end.

        What arrived before a failure is returned first; the failure is raised next.
        """
        piece = self.piece_now()
        while piece is None:
            await self.expect(read_timeout)
            piece = self.piece_now()
        return piece

    def piece_now(self) -> bytes | None:
        """``next_piece`` when it need not wait: what arrived since the last piece (empty
        at the body's end; a failure raised once what came before it was given), or
        ``None`` when nothing did yet: await ``expect`` and ask again. A reader that runs
        once per upstream read calls this and ``expect`` itself, without a coroutine."""
        parser = self.parser
        if parser.decoder is not None:
            return self._decoded_now(parser.decoder)
        if parser.buffered:
            return self.take_body()
        if not parser.complete:
            return None
        if parser.failure is not None:
            raise parser.failure
        return self.take_body()

    def _decoded_now(self, decoder: BodyDecoder) -> bytes | None:
        parser = self.parser
        while True:
            if not decoder.more and not parser.buffered and not parser.complete:
                return None
            piece = decoder.decode(self.take_body())
            if piece:
                return piece
            if parser.complete and not parser.buffered and not decoder.more:
                if parser.failure is not None:
                    raise parser.failure
                if not decoder.finished:
                    decoder.finish()
                return b""

    def _silence(self) -> None:
        """The silence watch's timer: expire the wait in progress once it has lasted its
        read timeout, or watch on until it would; a wait that began since the timer was
        armed is measured from its own start."""
        self._watch = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return  # not waiting: the next wait arms the watch again
        due = self._silent_since + self._limit
        if self._loop.time() >= due - _TIMER_SLACK:
            _expire(waiter)
        else:
            self._watch = self._loop.call_at(due, self._silence)
            self._watch_due = due

    def _unwatch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()

    @property
    def reusable(self) -> bool:
        """The reply was read to its end and both ends may carry another request."""
        return self.parser.reusable and not self.closed

    def park(self, expires: float) -> None:
        """Idle until ``expires`` (on the client's clock). The silence watch stays armed:
        with no wait in progress it does nothing when it fires, and a call that reuses the
        connection before then needs no timer of its own."""
        self.in_flight = False
        self.expires = expires
        self.parser.forget()

    def usable(self, now: float) -> bool:
        """Whether an idle connection may carry a request: not expired, and not found
        dead. Dead is closed, or readable while idle (an end of file, a reset, or bytes
        nobody asked for that the event loop has not read yet): the socket is polled,
        so what the kernel already holds counts even before the loop sees it."""
        transport = self.transport
        if self.closed or now >= self.expires or transport is None or transport.is_closing():
            return False
        return self._poller is None or not self._poller.poll(0)

    def close(self) -> None:
        self.closed = True
        self._unwatch()
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


_TIMER_SLACK = 0.001
"""A timer may fire this early (the event loop's clock is in milliseconds)."""


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimeout("the upstream sent nothing for too long"))
