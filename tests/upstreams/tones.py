"""Real audio for the fake engines and for clip fixtures: sine tones, WAV, and PyAV encodings.

``sine(seconds, rate)`` is 16-bit little-endian mono PCM; ``wav(pcm, rate)`` wraps it in a
44-byte RIFF header (``streamed=True`` writes 0xFFFFFFFF in both size fields, as
vLLM-Omni and OpenAI do for a WAV whose length is not known yet; ``riff_header`` writes
whatever sizes a test wants); ``encoded(pcm, rate, container)`` encodes it with PyAV into
any of the containers a clip may come in.
"""

from __future__ import annotations

import io
import math
import struct

import av

STREAMED_SIZE = 0xFFFFFFFF

CONTAINERS = {
    # container name: (PyAV format, codec, sample rate the codec needs or None)
    "wav": ("wav", "pcm_s16le", None),
    "mp3": ("mp3", "libmp3lame", None),
    "m4a": ("ipod", "aac", None),
    "ogg": ("ogg", "libopus", 48000),
    "webm": ("webm", "libopus", 48000),
    "flac": ("flac", "flac", None),
}


def sine(seconds: float, rate: int, frequency: float = 440.0) -> bytes:
    """``seconds`` of a sine tone as s16le mono PCM."""
    count = round(seconds * rate)
    step = 2 * math.pi * frequency / rate
    samples = [round(8000 * math.sin(step * i)) for i in range(count)]
    return struct.pack(f"<{count}h", *samples)


def wav_header(data_size: int, rate: int, *, streamed: bool = False) -> bytes:
    """The canonical 44-byte header for s16le mono PCM."""
    if streamed:
        return riff_header(rate, STREAMED_SIZE, STREAMED_SIZE)
    return riff_header(rate, 36 + data_size, data_size)


def riff_header(rate: int, riff_size: int, data_size: int) -> bytes:
    """A 44-byte header for s16le mono PCM carrying these two size fields, right or not."""
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", data_size)
    )


def wav(pcm: bytes, rate: int, *, streamed: bool = False) -> bytes:
    return wav_header(len(pcm), rate, streamed=streamed) + pcm


def encoded(pcm: bytes, rate: int, container: str) -> bytes:
    """``pcm`` (s16le mono at ``rate``) encoded by PyAV into ``container`` (``CONTAINERS``)."""
    fmt, codec, codec_rate = CONTAINERS[container]
    out_rate = codec_rate or rate
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=fmt) as output:
        stream = output.add_stream(codec, rate=out_rate)
        stream.layout = "mono"  # type: ignore[union-attr]
        resampler = av.AudioResampler(layout="mono", rate=out_rate)
        frame = av.AudioFrame(format="s16", layout="mono", samples=len(pcm) // 2)
        frame.planes[0].update(pcm)
        frame.sample_rate = rate
        for converted in resampler.resample(frame):
            for packet in stream.encode(converted):  # type: ignore[union-attr]
                output.mux(packet)
        for packet in stream.encode(None):  # type: ignore[union-attr]
            output.mux(packet)
    return buffer.getvalue()
