"""WAV framing of 16-bit PCM: writing headers, and reading a header off a stream.

A WAV whose length is not known when it starts (a streamed one) carries 0xFFFFFFFF in
its RIFF and data sizes, as vLLM-Omni and OpenAI write it; ``WavReader`` never trusts the
data size, it passes on every byte after the header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

STREAMED_SIZE = 0xFFFFFFFF
HEADER_LIMIT = 1 << 16
"""A header (with LIST and other chunks before ``data``) longer than this is refused."""


class NotWav(ValueError):
    """The bytes are not a WAV of 16-bit PCM."""


def wav_header(rate: int, *, data_size: int | None = None, channels: int = 1) -> bytes:
    """A 44-byte header for 16-bit PCM; ``data_size=None`` writes the streamed sizes."""
    riff = STREAMED_SIZE if data_size is None else 36 + data_size
    data = STREAMED_SIZE if data_size is None else data_size
    block = channels * 2
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * block, block, 16)
        + b"data"
        + struct.pack("<I", data)
    )


@dataclass(frozen=True, slots=True)
class WavFormat:
    rate: int
    channels: int
    bits: int


class WavReader:
    """Feed it a WAV's bytes as they arrive; it returns the PCM after the header."""

    __slots__ = ("_buffer", "format")

    def __init__(self) -> None:
        self._buffer = b""
        self.format: WavFormat | None = None

    def feed(self, piece: bytes) -> bytes:
        if self.format is not None:
            return piece
        self._buffer += piece
        parsed = _parse_header(self._buffer)
        if parsed is None:
            if len(self._buffer) > HEADER_LIMIT:
                raise NotWav("the WAV header is too long")
            return b""
        self.format, start = parsed
        rest, self._buffer = self._buffer[start:], b""
        return rest


def _parse_header(data: bytes) -> tuple[WavFormat, int] | None:
    """The format and where the samples start, or ``None`` when more bytes are needed."""
    if len(data) < 12:
        return None
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise NotWav("the audio is not a WAV file")
    position, found = 12, None
    while len(data) >= position + 8:
        name = data[position : position + 4]
        size = struct.unpack("<I", data[position + 4 : position + 8])[0]
        body = position + 8
        if name == b"data":
            if found is None:
                raise NotWav("the WAV has no format chunk before its data")
            return found, body
        if len(data) < body + size:
            return None
        if name == b"fmt ":
            found = _format(data[body : body + size])
        position = body + size + (size & 1)
    return None


def _format(chunk: bytes) -> WavFormat:
    if len(chunk) < 16:
        raise NotWav("the WAV format chunk is too short")
    tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", chunk[:16])
    if tag not in (1, 0xFFFE) or bits != 16:
        raise NotWav("the WAV does not hold 16-bit PCM")
    return WavFormat(rate=rate, channels=channels, bits=bits)
