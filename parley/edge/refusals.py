"""What a request aiohttp's parser refused becomes: one envelope, and at most one log line.

aiohttp's own answer to a broken request is a ``text/plain`` 400 that quotes the raw
line it choked on (an ``Authorization`` header with a control byte comes back, key and
all) and an ERROR with a traceback that quotes it again. Here the reply and the log line
are built from the exception's *class* and a fixed wording, never from its message or
the bytes it carries, so nothing the caller sent can reach either.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from aiohttp import http_exceptions as parse

from parley.errors import MalformedRequest

MAX_LINE_BYTES = 8190
"""Longest request line, and longest header (name and value), aiohttp's default."""
MAX_HEADERS = 128
"""Most header fields in one request, aiohttp's default."""
LOG_INTERVAL_SECONDS = 10.0
"""At most one line about refused requests this often; the others are counted in it."""

_TLS_RECORD = "Received HTTPS traffic on an HTTP port"
_TOO_MANY = "Too many headers received"
_HTTP2_PREFACE = "Pause on PRI/Upgrade"
_REQUEST_TARGETS = (b"/", b"*", b"http://", b"https://")


def refusal_for(exc: BaseException | None) -> MalformedRequest:
    """The envelope for a request the parser refused, chosen by the kind of failure."""
    message = str(getattr(exc, "message", "")).split("\n", 1)[0]  # before any quoted bytes
    if isinstance(exc, parse.LineTooLong):
        return _too_long(exc)
    if message == _TOO_MANY:
        return MalformedRequest(
            f"The request has more than {MAX_HEADERS} header fields.",
            status=431,
            code="request_header_fields_too_large",
        )
    if isinstance(exc, parse.BadHttpMethod):
        if message == _TLS_RECORD:
            return MalformedRequest(
                "This port speaks plain HTTP/1.1, not TLS; use http://, not https://.",
                code="tls_on_plain_http",
            )
        return MalformedRequest("The request line does not start with an HTTP method.")
    if message.startswith(_HTTP2_PREFACE) or "Invalid HTTP version" in message:
        return MalformedRequest(
            "This server speaks HTTP/1.1 (and 1.0) only.",
            status=505,
            code="http_version_not_supported",
            headers={"x-should-retry": "false"},
        )
    if isinstance(exc, parse.BadStatusLine):
        return MalformedRequest("The request line is malformed.")
    if isinstance(exc, parse.InvalidURLError):
        return MalformedRequest("The request path is not a valid URL path.")
    if isinstance(exc, parse.PayloadEncodingError):
        return MalformedRequest("The request body's framing or encoding is malformed.")
    return _framing(message)


def _too_long(exc: parse.LineTooLong) -> MalformedRequest:
    line = exc.args[0] if exc.args else b""
    if isinstance(line, bytearray) or bytes(line).startswith(_REQUEST_TARGETS):
        return MalformedRequest(
            f"The request line is longer than {MAX_LINE_BYTES} bytes.",
            status=414,
            code="uri_too_long",
        )
    return MalformedRequest(
        f"A request header is longer than {MAX_LINE_BYTES} bytes.",
        status=431,
        code="request_header_fields_too_large",
    )


def _framing(message: str) -> MalformedRequest:
    if "Content-Length" in message or "Transfer-Encoding" in message:
        return MalformedRequest(
            "The request's Content-Length or Transfer-Encoding is invalid or contradictory."
        )
    if "chunk" in message:
        return MalformedRequest("The request body's chunked framing is malformed.")
    if "'Host'" in message:
        return MalformedRequest("An HTTP/1.1 request needs exactly one valid Host header.")
    return MalformedRequest(
        "A request header is malformed (an invalid name, a control character or a bare line break)."
    )


class RefusalLog:
    """One short line per ``interval`` about refused requests, with a count of the rest.

    The line names the peer address, the status and the exception class: never a
    message or a byte of the request. A flood of garbage costs one line per interval.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = LOG_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._next = 0.0
        self._suppressed = 0

    def refused(self, peer: str | None, status: int, what: BaseException | str | None) -> None:
        """Note one refusal (``status`` 0: the connection was closed without a reply)."""
        now = self._clock()
        if now < self._next:
            self._suppressed += 1
            return
        kind = what if isinstance(what, str) else type(what).__name__ if what else "error"
        more = f" ({self._suppressed} more since the last line)" if self._suppressed else ""
        answer = str(status) if status else "closed"
        self._logger.warning("refused a request from %s: %s %s%s", peer, answer, kind, more)
        self._next = now + self._interval
        self._suppressed = 0
