"""Audio clips of a known length in every supported container, written with PyAV.

The signal is a 440 Hz tone (so lossy encoders keep every frame); nothing binary is
committed. ``clip("mp3", 3.0)`` is three seconds of MPEG audio, and so on.
"""

from __future__ import annotations

import io
import math
import struct
from fractions import Fraction

import av

# container name → (FFmpeg muxer, encoder, sample rate)
FORMATS: dict[str, tuple[str, str, int]] = {
    "wav": ("wav", "pcm_s16le", 16_000),
    "mp3": ("mp3", "libmp3lame", 16_000),
    "m4a": ("ipod", "aac", 16_000),
    "ogg": ("ogg", "libopus", 48_000),
    "webm": ("webm", "libopus", 48_000),
    "flac": ("flac", "flac", 16_000),
}
FRAME = 1024


def tone(seconds: float, rate: int) -> bytes:
    """Signed 16-bit mono PCM of a 440 Hz tone."""
    count = round(seconds * rate)
    amplitude = 0.3 * 32767
    return b"".join(
        struct.pack("<h", int(amplitude * math.sin(2 * math.pi * 440 * i / rate)))
        for i in range(count)
    )


def clip(kind: str, seconds: float) -> bytes:
    """``seconds`` of tone in the container ``kind`` (a key of ``FORMATS``)."""
    muxer, encoder, rate = FORMATS[kind]
    pcm = tone(seconds, rate)
    out = io.BytesIO()
    with av.open(out, "w", format=muxer) as container:
        stream = container.add_stream(encoder, rate=rate, layout="mono")
        for start in range(0, len(pcm), FRAME * 2):
            chunk = pcm[start : start + FRAME * 2]
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


def streamed_wav(seconds: float, size_field: int, rate: int = 24_000) -> bytes:
    """A WAV as streaming engines send it: RIFF and data sizes set to ``size_field``."""
    pcm = tone(seconds, rate)
    header = (
        b"RIFF"
        + struct.pack("<I", size_field)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", size_field)
    )
    return header + pcm
