"""What llhttp's callbacks make of one reply's bytes: ``ReplyParser``, and its bounds.

The reply's status and head, its body in the pieces it arrived in, whether it is
complete, and what failed it: state the callbacks change and the reader looks at.
``Connection`` is a ``ReplyParser`` with a socket: it feeds the bytes in, and wakes its
reader when the state changes (``_wake``).

llhttp keeps a header line in memory until it ends, and bounds neither its length nor
how many come, so the head is held within ``HeadLimits``: its fields are counted as they
complete, and the bytes that arrive in a row without adding to the body (a head still
being sent, a chunk's framing, trailers) by the reads that bring them (``within_bound``).
Past either bound the reply is a ``HeadTooLarge`` and its connection closes, so an
upstream holds no more than a bound's worth of memory in a head, however it sends it.
"""

from __future__ import annotations

from dataclasses import dataclass

import httptools

from parley.http.decoding import ENCODINGS, BodyDecoder
from parley.http.errors import BrokenReply, HeadTooLarge

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
    """One reply at a time, as llhttp parses it; ``begin`` starts the next one."""

    __slots__ = (
        "_barren",
        "_bodiless",
        "_body",
        "_buffered",
        "_decoder",
        "_failure",
        "_fields_left",
        "_framed",
        "_head_left",
        "_keep_alive",
        "_limits",
        "_parser",
        "complete",
        "headers",
        "headers_done",
        "keep_alive_hint",
        "status",
    )

    def __init__(self, limits: HeadLimits) -> None:
        self._limits = limits
        self.keep_alive_hint: float | None = None
        """The ``Keep-Alive: timeout=N`` the upstream last sent, in seconds."""
        self.begin(bodiless=False)

    def begin(self, bodiless: bool) -> None:
        """Ready for a new reply (with no body whatever its head says, if ``bodiless``)."""
        self._parser = httptools.HttpResponseParser(self)
        self._bodiless = bodiless
        self._body: list[bytes] = []
        self._buffered = 0
        self._failure: Exception | None = None
        self.status = 0
        self.headers: dict[bytes, bytes] = {}
        self.headers_done = False
        self.complete = False
        self._keep_alive = False
        self._framed = False
        self._decoder: BodyDecoder | None = None
        self._head_left = self._limits.max_bytes
        self._fields_left = self._limits.max_fields
        self._barren = 0
        """Bytes received in a row without a byte of body."""

    def forget(self) -> None:
        """Let go of what the last reply left (its headers, its decoder): it was read."""
        self.headers = {}
        self._decoder = None

    # llhttp callbacks

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
        self.status = status = self._parser.get_status_code()
        self.headers_done = True
        self._keep_alive = self._parser.should_keep_alive()  # only valid until the end
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
        if status >= 200:
            self._answered()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)
        self._barren = 0

    def on_message_complete(self) -> None:
        if 100 <= self.status < 200:  # an interim reply (103 Early Hints...): the real one follows
            self.status, self.headers, self.headers_done = 0, {}, False
            return
        self.complete = True

    def _set_decoder(self, encoding: bytes) -> None:
        if encoding in ENCODINGS:
            self._decoder = BodyDecoder(encoding)
        elif encoding != b"identity":
            self._fail(BrokenReply("the upstream sent a body in an unsupported encoding"))

    # the reply's state, for the connection and the reader

    def within_bound(self, size: int) -> bool:
        """Count a read of ``size`` bytes that added nothing to the body (a head still
        arriving, a chunk's framing, trailers); ``False`` once more than the head's bound
        of those came in a row, and the reply has failed: llhttp holds a header line
        until it ends, so one that never does must be cut off here."""
        self._barren += size
        if self._barren <= self._limits.max_bytes or self.complete:
            return True
        self._fail(HeadTooLarge("the upstream sent a reply head larger than the bound"))
        return False

    @property
    def answered(self) -> bool:
        """The final reply's head arrived (an interim 1xx does not count)."""
        return self.headers_done and self.status >= 200

    @property
    def buffered(self) -> int:
        return self._buffered

    @property
    def drained(self) -> bool:
        """The body is complete and every piece of it was taken (and decoded)."""
        decoder = self._decoder
        return (
            self.complete
            and not self._body
            and self._failure is None
            and (decoder is None or decoder.finished)
        )

    def _fail(self, error: Exception) -> None:
        if self._failure is None:
            self._failure = error
        self._wake()

    def _wake(self) -> None:
        """The reply's state changed: the connection wakes whoever waits on it."""

    def _answered(self) -> None:
        """The final head arrived: the connection stops sending a body still being sent."""


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
