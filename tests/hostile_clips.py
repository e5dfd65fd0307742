"""Audio a hostile caller crafts to cheat the bill or burn Parley's CPU (issue 19).

``silent_flac(frames, block, rate)`` writes FLAC by hand: a STREAMINFO block and the
same frame ``frames`` times, each a constant subframe of ``block`` zero samples, about
15 bytes a frame (FFmpeg's decoder does not check frame numbers). With big blocks it
holds hours in kilobytes; with tiny ones it costs a decoder call every few samples.
``rate_changing_mp3`` joins MP3s of different sample rates; ``one_sample_wav`` is a WAV
of a single sample; ``codecless`` makes an m4a or webm whose audio names no codec.
"""

from __future__ import annotations

import io
import struct
from fractions import Fraction

import av

from tests.clips import clip
from tests.upstreams.tones import riff_header, sine

_RATE_CODES = {8000: 4, 16000: 5, 22050: 6, 24000: 7, 32000: 8, 44100: 9, 48000: 10}


def _crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def silent_flac(frames: int, block: int, rate: int, *, numbered: bool = True) -> bytes:
    """``frames`` constant FLAC frames of ``block`` samples at ``rate`` Hz (mono, 16-bit).

    A rate FLAC frame headers have no code for is written in the header in Hz. Frames
    not ``numbered`` are all frame 0 (one frame repeated, quick to build for a large
    file); their timestamps then say less than their samples."""
    info = (
        struct.pack(">HH", block, block)
        + bytes(6)  # frame sizes: unknown
        + ((rate << 44) | (0 << 41) | (15 << 36)).to_bytes(8, "big")  # mono, 16-bit, 0 total
        + bytes(16)  # no MD5
    )
    start = b"fLaC" + bytes([0x80, 0, 0, 34]) + info
    if not numbered:
        return start + _frame(0, block, rate) * frames
    return start + b"".join(_frame(number, block, rate) for number in range(frames))


def _frame(number: int, block: int, rate: int) -> bytes:
    code = _RATE_CODES.get(rate)
    head = bytes([0xFF, 0xF8, 0x70 | (code if code is not None else 0xD), 0x08])
    head += _utf8(number) + struct.pack(">H", block - 1)
    if code is None:
        head += struct.pack(">H", rate)
    head += bytes([_crc8(head)])
    body = head + b"\x00\x00\x00"  # a constant subframe of value 0
    return body + struct.pack(">H", _crc16(body))


def _utf8(number: int) -> bytes:
    """A frame number as FLAC writes it (UTF-8's scheme, up to 2**21 here)."""
    if number < 0x80:
        return bytes([number])
    if number < 0x800:
        return bytes([0xC0 | number >> 6, 0x80 | number & 0x3F])
    if number < 0x10000:
        return bytes([0xE0 | number >> 12, 0x80 | (number >> 6) & 0x3F, 0x80 | number & 0x3F])
    return bytes(
        [
            0xF0 | number >> 18,
            0x80 | (number >> 12) & 0x3F,
            0x80 | (number >> 6) & 0x3F,
            0x80 | number & 0x3F,
        ]
    )


def rate_changing_mp3(parts: list[tuple[int, float]]) -> bytes:
    """MP3s of (rate, seconds) one after the other, a tone in each: one file whose
    sample rate changes between frames."""
    return b"".join(_mp3(sine(seconds, rate), rate) for rate, seconds in parts)


def _mp3(pcm: bytes, rate: int) -> bytes:
    out = io.BytesIO()
    with av.open(out, "w", format="mp3") as container:
        stream = container.add_stream("libmp3lame", rate=rate, layout="mono")
        for start in range(0, len(pcm), 2304):
            chunk = pcm[start : start + 2304]
            frame = av.AudioFrame(format="s16", layout="mono", samples=len(chunk) // 2)
            frame.planes[0].update(chunk)
            frame.sample_rate = rate
            frame.pts = start // 2
            frame.time_base = Fraction(1, rate)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def one_sample_wav(rate: int = 16_000) -> bytes:
    return riff_header(rate, 38, 2) + struct.pack("<h", 1000)


def codecless(kind: str) -> bytes:
    """An m4a or webm clip whose audio track names a codec nobody knows."""
    data = clip(kind, 2.0)
    if kind == "m4a":
        return data.replace(b"mp4a", b"xxxx").replace(b"esds", b"xxxx")
    return data.replace(b"A_OPUS", b"A_FOO1")
