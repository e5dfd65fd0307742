"""AWS's event-stream framing (``application/vnd.amazon.eventstream``), decoded sans-IO.

Bedrock's ``ConverseStream`` sends its events in binary frames, not SSE. A frame is a
prelude (total length, headers length, both 4-byte big-endian, and the CRC32 of those
eight bytes), the headers (a name of up to 255 bytes, a type byte, a typed value), the
payload, and the CRC32 of everything before it. ``EventStreamDecoder`` is fed the body
as it arrives, in any split, and returns the whole frames it completes; at a frame whose
checksum fails, whose lengths do not add up or that is past the size bound it returns
the frames before it and keeps the reason in ``error`` (``too_large`` for the bound),
taking nothing more: a stream cannot be resynchronised. No socket, no event loop:
tested with bytes split at every boundary.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

PRELUDE = 12
"""Total length, headers length and the prelude's CRC."""
TRAILER = 4
HeaderValue = bool | int | bytes | str


class FramingError(ValueError):
    """The bytes are not a well-formed frame (bad checksum, impossible lengths, too large)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One message: its headers by name, and its payload."""

    headers: dict[str, HeaderValue]
    payload: bytes

    def header(self, name: str) -> str | None:
        """A string header's value (``:message-type``, ``:event-type``...), or ``None``."""
        value = self.headers.get(name)
        return value if isinstance(value, str) else None


class EventStreamDecoder:
    """Bytes in, whole ``Frame`` objects out; ``max_frame_bytes`` bounds one frame."""

    __slots__ = ("_buffer", "_max", "error", "too_large")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buffer = bytearray()
        self._max = max_frame_bytes
        self.error: str | None = None
        """Why the framing failed, once it has."""
        self.too_large = False
        """The failure was a frame past ``max_frame_bytes``."""

    @property
    def pending(self) -> int:
        """Bytes held of a frame not yet complete."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        """The frames ``data`` completes, in order, up to the first malformed one."""
        if self.error is not None:
            return []
        buffer = self._buffer
        buffer += data
        frames: list[Frame] = []
        start = 0
        try:
            while len(buffer) - start >= PRELUDE:
                total, headers_length, prelude_crc = struct.unpack_from(">III", buffer, start)
                if zlib.crc32(buffer[start : start + 8]) != prelude_crc:
                    raise FramingError("the prelude's checksum does not match")
                if total > self._max:
                    self.too_large = True
                    raise FramingError(f"a frame of {total} bytes is past the bound")
                if total < PRELUDE + TRAILER + headers_length:
                    raise FramingError("the frame's lengths do not add up")
                if len(buffer) - start < total:
                    break
                frames.append(_frame(bytes(buffer[start : start + total]), headers_length))
                start += total
        except FramingError as error:
            self.error = str(error)
            buffer.clear()
            return frames
        del buffer[:start]
        return frames


def _frame(raw: bytes, headers_length: int) -> Frame:
    total = len(raw)
    (message_crc,) = struct.unpack_from(">I", raw, total - TRAILER)
    if zlib.crc32(memoryview(raw)[: total - TRAILER]) != message_crc:
        raise FramingError("the message's checksum does not match")
    headers = _headers(raw[PRELUDE : PRELUDE + headers_length])
    return Frame(headers, raw[PRELUDE + headers_length : total - TRAILER])


_FIXED = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}
"""Header types of a fixed-size integer value: byte, short, int, long, timestamp (ms)."""


def _headers(raw: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    at = 0
    try:
        while at < len(raw):
            size = raw[at]
            name = raw[at + 1 : at + 1 + size].decode()
            at += 1 + size
            kind = raw[at]
            at += 1
            value: HeaderValue
            if kind in (0, 1):
                value = kind == 0
            elif kind in _FIXED:
                form = _FIXED[kind]
                (value,) = struct.unpack_from(form, raw, at)
                at += struct.calcsize(form)
            elif kind in (6, 7):
                (length,) = struct.unpack_from(">H", raw, at)
                data = raw[at + 2 : at + 2 + length]
                if len(data) != length:
                    raise FramingError("a header's value is cut short")
                value = data.decode() if kind == 7 else data
                at += 2 + length
            elif kind == 9:
                value = raw[at : at + 16]
                at += 16
            else:
                raise FramingError(f"unknown header value type {kind}")
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError):
        raise FramingError("the headers are malformed") from None
    if at != len(raw):
        raise FramingError("the headers overrun their length")
    return headers
