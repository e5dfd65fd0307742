"""Audio clips of a known length in every supported container, written with PyAV.

The signal is a 440 Hz tone (so lossy encoders keep every frame); nothing binary is
committed. ``clip("mp3", 3.0)`` is three seconds of MPEG audio, and so on;
``written(pcm, kind)`` puts any 16-bit mono samples in a container the same way.
"""

from __future__ import annotations

import io
from fractions import Fraction

import av

from tests.upstreams.tones import riff_header, sine

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


def clip(kind: str, seconds: float) -> bytes:
    """``seconds`` of tone in the container ``kind`` (a key of ``FORMATS``)."""
    return written(sine(seconds, FORMATS[kind][2]), kind)


def written(pcm: bytes, kind: str) -> bytes:
    """16-bit mono ``pcm`` at ``kind``'s sample rate, encoded in the container ``kind``
    frame by frame (each with its timestamp, so the clip lasts exactly as long)."""
    muxer, encoder, rate = FORMATS[kind]
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
    return riff_header(rate, size_field, size_field) + sine(seconds, rate)
