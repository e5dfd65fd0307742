"""Decoding a ``gzip`` or ``deflate`` body on the reader's side, a bounded piece at a time.

Parley asks for ``identity``; an upstream that compresses anyway is decoded here. Output
is produced at most ``STEP`` bytes per call, whatever the input: a small compressed read
cannot become a gigabyte in memory, and the reader's own bounds see every piece. A body
that does not decode, or ends before its compressed stream does, is a ``BrokenReply``.
"""

from __future__ import annotations

import zlib

from parley.http.errors import BrokenReply

STEP = 1 << 20
ENCODINGS = frozenset({b"gzip", b"x-gzip", b"deflate"})
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_OR_ZLIB = zlib.MAX_WBITS | 32
_RAW_DEFLATE = -zlib.MAX_WBITS


class BodyDecoder:
    """One body's decoder. ``decode`` takes what arrived; ``more`` says output is pending
    without new input; ``finish`` checks the compressed stream ended with the body."""

    __slots__ = ("_deflate", "_started", "_tail", "_zlib", "finished", "more")

    def __init__(self, encoding: bytes) -> None:
        self._deflate = encoding == b"deflate"
        self._zlib = zlib.decompressobj(_GZIP_OR_ZLIB)
        self._started = False
        self._tail = b""
        self.more = False
        self.finished = False

    def decode(self, data: bytes) -> bytes:
        """At most ``STEP`` bytes of output; input it could not use yet is kept."""
        if self._tail:
            data = self._tail + data if data else self._tail
        if not data and not self.more:
            return b""
        try:
            out = self._zlib.decompress(data, STEP)
        except zlib.error:
            out = self._raw_deflate(data)
        self._started = True
        self._tail = self._zlib.unconsumed_tail
        self.more = bool(self._tail) or len(out) == STEP
        if self._zlib.eof and self._zlib.unused_data:
            self._next_member(self._zlib.unused_data)
        return out

    def finish(self) -> None:
        """The body ended: its compressed stream must have ended too."""
        if not self._zlib.eof:
            raise BrokenReply("the upstream sent a compressed body that was cut short")
        self.finished = True

    def _raw_deflate(self, data: bytes) -> bytes:
        """``deflate`` sent without its zlib wrapper, as some servers do: retried raw,
        once, from the first byte; any other failure is a broken reply."""
        if not self._deflate or self._started:
            raise BrokenReply("the upstream sent a body that does not decompress")
        self._zlib = zlib.decompressobj(_RAW_DEFLATE)
        try:
            return self._zlib.decompress(data, STEP)
        except zlib.error:
            raise BrokenReply("the upstream sent a body that does not decompress") from None

    def _next_member(self, rest: bytes) -> None:
        """Bytes after the end of a compressed stream: another gzip member, or garbage."""
        if self._deflate or not rest.startswith(_GZIP_MAGIC[: len(rest)]):
            raise BrokenReply("the upstream sent bytes after the end of a compressed body")
        self._zlib = zlib.decompressobj(_GZIP_OR_ZLIB)
        self._tail = rest
        self.more = True
