"""Audio in and out of the engine, with PyAV.

Out: eSpeak's 22050 Hz samples are resampled to ``OUTPUT_RATE`` (24 kHz, OpenAI's rate
for ``pcm``) as they come (``Resampler``); ``wav`` and ``pcm`` are sent as they are made
(a WAV header whose sizes are 0xFFFFFFFF when streamed, exact when whole), ``mp3``,
``flac``, ``opus`` (Ogg) and ``aac`` (ADTS) are encoded from the whole clip (``encode``).

In: any container PyAV reads is decoded and resampled to 16 kHz mono 16-bit, what
PocketSphinx hears (``decode_for_recognition``).
"""

from __future__ import annotations

import io

import av

from parley.audio.wav import wav_header

OUTPUT_RATE = 24000
RECOGNITION_RATE = 16000
MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "mp3": "audio/mpeg",
    "flac": "audio/flac",
    "opus": "audio/ogg",
    "aac": "audio/aac",
}
STREAMED_FORMATS = frozenset({"wav", "pcm"})
_CONTAINERS = {
    "mp3": ("mp3", "libmp3lame", 96_000),
    "flac": ("flac", "flac", 0),
    "opus": ("ogg", "libopus", 48_000),
    "aac": ("adts", "aac", 96_000),
}
"""format → (muxer, encoder, bit rate): LAME's own default at 24 kHz is 32 kbit/s, which
blurs speech enough to mislead a recogniser."""


class UnreadableAudio(ValueError):
    """Bytes PyAV cannot read as audio."""


def _frame(pcm: bytes, rate: int) -> av.AudioFrame:
    frame = av.AudioFrame(format="s16", layout="mono", samples=len(pcm) // 2)
    frame.planes[0].update(pcm)
    frame.sample_rate = rate
    return frame


def _samples(frames: list[av.AudioFrame]) -> bytes:
    return b"".join(bytes(frame.planes[0])[: frame.samples * 2] for frame in frames)


class Resampler:
    """16-bit mono samples from one rate to another, piece by piece."""

    def __init__(self, source_rate: int, target_rate: int) -> None:
        self._source_rate = source_rate
        self._odd = b""
        self._resampler = av.AudioResampler(format="s16", layout="mono", rate=target_rate)

    def feed(self, pcm: bytes) -> bytes:
        pcm = self._odd + pcm
        whole = len(pcm) - len(pcm) % 2
        pcm, self._odd = pcm[:whole], pcm[whole:]
        if not pcm:
            return b""
        return _samples(self._resampler.resample(_frame(pcm, self._source_rate)))

    def finish(self) -> bytes:
        return _samples(self._resampler.resample(None))


def encode(pcm: bytes, rate: int, response_format: str) -> bytes:
    """A whole clip of 16-bit mono samples in ``response_format``."""
    if response_format == "pcm":
        return pcm
    if response_format == "wav":
        return wav_header(rate, data_size=len(pcm)) + pcm
    container, codec, bit_rate = _CONTAINERS[response_format]
    sink = io.BytesIO()
    with av.open(sink, mode="w", format=container) as output:
        stream = output.add_stream(codec, rate=rate)
        assert isinstance(stream, av.AudioStream)
        stream.layout = "mono"
        if bit_rate:
            stream.bit_rate = bit_rate
        if pcm:
            for packet in stream.encode(_frame(pcm, rate)):
                output.mux(packet)
        for packet in stream.encode(None):
            output.mux(packet)
    return sink.getvalue()


def decode_for_recognition(data: bytes) -> tuple[bytes, float]:
    """16 kHz mono 16-bit samples of any container PyAV reads, and their duration (s)."""
    resampler = av.AudioResampler(format="s16", layout="mono", rate=RECOGNITION_RATE)
    pieces: list[bytes] = []
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise UnreadableAudio("the file holds no audio stream")
            for frame in container.decode(audio=0):
                frame.pts = None
                pieces.append(_samples(resampler.resample(frame)))
        pieces.append(_samples(resampler.resample(None)))
    except (av.FFmpegError, ValueError) as error:
        if isinstance(error, UnreadableAudio):
            raise
        raise UnreadableAudio(f"the file could not be decoded as audio ({error})") from None
    pcm = b"".join(pieces)
    return pcm, len(pcm) / (2 * RECOGNITION_RATE)
