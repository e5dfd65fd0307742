"""One reply's bytes made into its state, with no socket: ``ReplyParser``, and its bounds.

Sans-IO, as h11 is: the parser is fed the bytes that arrived (``feed``) and told when
they end (``end_of_input``); in between, its state says what the reply is so far: its
status and head, its body in the pieces it arrived in (``take``), whether it is complete,
and what failed it. It reads no socket, keeps no timer and wakes nobody: the connection
(``connection.py``) owns the socket, flow control, the silence timer and the pool's view,
and looks at the state after each feed. So every framing rule can be tested by feeding
bytes (``tests/http/test_parser.py``).

llhttp (through ``httptools``) does the parsing. It keeps a header line in memory until it
ends, and bounds neither its length nor how many come, so the head is held within
``HeadLimits``: its fields are counted as they complete, and the bytes that arrive in a
row without adding to the body (a head still being sent, a chunk's framing, trailers) by
the feeds that bring them. Past either bound the reply is a ``HeadTooLarge``. Parsing
stops at the end of the reply: one request was sent, so any byte after its reply is not
its upstream's to send, and the connection that carried it can carry nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

import httptools

from parley.http.decoding import ENCODINGS, BodyDecoder
from parley.http.errors import BrokenReply, Disconnected, HeadTooLarge

PARSE_ERRORS = (httptools.HttpParserError, httptools.HttpParserUpgrade)
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
FIELD_FRAMING = 4
"""What a field's line holds besides its name and value: ``": "`` and its ``CRLF``."""


@dataclass(frozen=True, slots=True)
class HeadLimits:
    """The most one reply's head may hold (``upstream`` in the settings).

    ``max_bytes`` bounds the head's fields (names and values, with a line's framing) and
    any run of bytes that carries no body; ``max_fields`` counts header and trailer
    fields together, interim replies' (``103 Early Hints``) included.
    """

    max_bytes: int = MAX_HEAD_BYTES
    max_fields: int = MAX_HEADERS


DEFAULT_HEAD_LIMITS = HeadLimits()


class _AfterTheReply(Exception):
    """Raised from llhttp's callback when a second message begins: parsing stops there."""


class _HeadOverflow(Exception):
    """Raised from llhttp's header callback past the head's bounds: parsing stops there."""


class ReplyParser:
    """One reply at a time, as llhttp parses it; ``begin`` starts the next one.

    ``feed`` the bytes as they arrive and ``end_of_input`` when they stop; read the state
    (``status``, ``headers``, ``answered``, ``complete``, ``failure``) and ``take`` the body
    that arrived. A failure is kept, not raised: what arrived before it is still taken
    first (a reader gives out the pieces, then raises the failure).
    """

    __slots__ = (
        "_barren",
        "_bodiless",
        "_body",
        "_fields_left",
        "_framed",
        "_head_left",
        "_keep_alive",
        "_limits",
        "_llhttp",
        "buffered",
        "complete",
        "decoder",
        "failure",
        "headers",
        "headers_done",
        "keep_alive_hint",
        "status",
    )

    def __init__(self, limits: HeadLimits = DEFAULT_HEAD_LIMITS) -> None:
        self._limits = limits
        self.keep_alive_hint: float | None = None
        """The ``Keep-Alive: timeout=N`` the upstream last sent, in seconds."""
        self._llhttp: httptools.HttpResponseParser | None = None
        self.complete = False
        self._keep_alive = False
        self._bodiless = False
        self.begin(bodiless=False)

    def begin(self, bodiless: bool) -> None:
        """Ready for a new reply (with no body whatever its head says, if ``bodiless``).

        llhttp carries on from a reply that ended whole on a connection kept alive, as
        it is made to; after anything else (a reply to ``HEAD``, whose length llhttp
        would wait for as a body, a failure, a close) it starts afresh."""
        if not (
            self._llhttp is not None
            and self.complete
            and self._keep_alive
            and not self._bodiless
            and self.failure is None
        ):
            self._llhttp = httptools.HttpResponseParser(self)
        self._bodiless = bodiless
        self._body: list[bytes] = []
        self.buffered = 0
        """Bytes of the body that arrived and were not taken yet."""
        self.failure: Exception | None = None
        """What failed the reply (the first failure counts)."""
        self.status = 0
        self.headers: dict[bytes, bytes] = {}
        self.headers_done = False
        self.complete = False
        self._keep_alive = False
        self._framed = False
        self.decoder: BodyDecoder | None = None
        """The body's decoder when it came compressed; the reader decodes what it takes."""
        self._head_left = self._limits.max_bytes
        self._fields_left = self._limits.max_fields
        self._barren = 0
        """Bytes received in a row without a byte of body."""

    def feed(self, data: bytes) -> bool:
        """Parse bytes that arrived; ``False`` when the connection that brought them can
        carry nothing more: the reply is not valid HTTP or its head passed its bounds
        (``failure``), or bytes came after the reply (which stays whole)."""
        if self.complete:
            return False  # after the reply, nothing may follow
        llhttp = self._llhttp
        if llhttp is None:
            return False
        buffered = self.buffered
        try:
            llhttp.feed_data(data)
        except PARSE_ERRORS:
            if not self.complete:  # else: bytes after a whole reply, which stays intact
                self._fail(BrokenReply("the upstream sent a reply that is not valid HTTP"))
            return False
        if self.buffered == buffered:  # ``_within_bound``, written out: once a read
            self._barren += len(data)
            if self._barren > self._limits.max_bytes and not self.complete:
                self._fail(HeadTooLarge("the upstream sent a reply head larger than the bound"))
                return False
        return True

    def end_of_input(self, clean: bool) -> None:
        """No more bytes will come (``clean``: the upstream closed, rather than a reset or
        a failure of the socket). A body framed by neither length nor chunks ends here; any
        other reply not complete yet is cut, a ``Disconnected``."""
        if self.headers_done and not self.complete and not self._framed and clean:
            self.complete = True
        elif not self.complete:
            self._fail(Disconnected("the upstream closed the connection"))
        self._llhttp = None  # llhttp holds this object's bound callbacks: the cycle ends

    def take(self) -> bytes:
        """Everything of the body that arrived since the last ``take`` (empty when none)."""
        if not self._body:
            return b""
        pieces, self._body, self.buffered = self._body, [], 0
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def forget(self) -> None:
        """Let go of what the last reply left (its headers, its decoder): it was read."""
        self.headers = {}
        self.decoder = None

    @property
    def answered(self) -> bool:
        """The final reply's head arrived (an interim 1xx does not count)."""
        return self.headers_done and self.status >= 200

    @property
    def reusable(self) -> bool:
        """The reply was read to its end and its head lets the connection carry another."""
        return self._keep_alive and self.drained

    @property
    def drained(self) -> bool:
        """The body is complete and every piece of it was taken (and decoded)."""
        decoder = self.decoder
        return (
            self.complete
            and not self._body
            and self.failure is None
            and (decoder is None or decoder.finished)
        )

    def forgo_reuse(self) -> None:
        """The request was not sent whole: the connection carries nothing after this reply."""
        self._keep_alive = False

    def _fail(self, error: Exception) -> None:
        if self.failure is None:
            self.failure = error

    # llhttp's callbacks

    def on_message_begin(self) -> None:
        if self.complete:
            raise _AfterTheReply

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_left -= len(name) + len(value) + FIELD_FRAMING
        self._fields_left -= 1
        if self._head_left < 0 or self._fields_left < 0:
            self._fail(HeadTooLarge("the upstream sent a reply head larger than the bound"))
            raise _HeadOverflow
        if not self.headers_done:  # trailers after a chunked body are not headers
            self.headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        llhttp = self._llhttp
        assert llhttp is not None
        self.status = status = llhttp.get_status_code()
        self.headers_done = True
        self._keep_alive = llhttp.should_keep_alive()  # only valid until the end
        headers = self.headers
        coding = headers.get(b"transfer-encoding")
        self._framed = b"content-length" in headers or coding is not None
        if coding is not None and coding.strip().lower() != b"chunked":
            self._fail(BrokenReply("the upstream sent a body in an unsupported transfer coding"))
        encoding = headers.get(b"content-encoding")
        if encoding is not None:
            self._set_decoder(encoding.strip().lower())
        hint = headers.get(b"keep-alive")
        if hint is not None:
            self.keep_alive_hint = keep_alive_timeout(hint)
        if self._bodiless and status >= 200:
            self.complete = True  # the reply to HEAD has a length, never a body

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self.buffered += len(body)
        self._barren = 0

    def on_message_complete(self) -> None:
        if 100 <= self.status < 200:  # an interim reply (103 Early Hints...): the real one follows
            self.status, self.headers, self.headers_done = 0, {}, False
            return
        self.complete = True

    def _set_decoder(self, encoding: bytes) -> None:
        if encoding in ENCODINGS:
            self.decoder = BodyDecoder(encoding)
        elif encoding != b"identity":
            self._fail(BrokenReply("the upstream sent a body in an unsupported encoding"))


def keep_alive_timeout(hint: bytes) -> float | None:
    """The ``timeout`` of a ``Keep-Alive`` header (``timeout=5, max=100``), if readable."""
    for part in hint.split(b","):
        name, _, value = part.partition(b"=")
        if name.strip().lower() == b"timeout":
            try:
                return max(0.0, float(value.strip().strip(b'"')))
            except ValueError:
                return None
    return None
