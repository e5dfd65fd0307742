"""Decoding a clip with PyAV to measure it (``probe`` imports this on first use).

A header's claim is never used alone: a streamed WAV's sizes are placeholders (0 or
0xFFFFFFFF), a truncated or forged MP3 keeps its Xing frame count, an Ogg file's last
granule can say anything. The duration is the decoded samples over the sample rate, and
no more than the end of the last packet's timestamp where the container has timestamps
(that trims the encoder padding a decoder still emits for AAC, for example).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import suppress
from fractions import Fraction
from typing import IO

import av
import av.container

from parley.audio.errors import EmptyAudio, NotAudio
from parley.audio.info import AudioInfo
from parley.audio.sniff import Container


def measure(file: IO[bytes], container: Container) -> AudioInfo:
    try:
        with av.open(file, mode="r", format=container.demuxer, metadata_errors="ignore") as opened:
            if not opened.streams.audio:
                raise NotAudio(f"the {container} file has no audio track")
            stream = opened.streams.audio[0]
            decoded, packet_end = _decode(opened, stream)
            codec = stream.codec_context.name
            channels = stream.codec_context.channels
            rate = stream.codec_context.sample_rate
    except av.error.FFmpegError as exc:
        raise NotAudio(f"the {container} data cannot be decoded") from exc
    if not rate or decoded is None:
        raise NotAudio(f"the {container} data cannot be decoded")
    seconds = float(decoded if packet_end is None else min(decoded, packet_end))
    if seconds <= 0:
        raise EmptyAudio("the audio lasts 0 seconds")
    return AudioInfo(container, codec, rate, channels, seconds)


def _decode(
    opened: av.container.InputContainer, stream: av.AudioStream
) -> tuple[Fraction | None, Fraction | None]:
    """Decoded length and the end of the last timestamped packet, both in seconds."""
    samples = 0
    rate = 0
    end: int | None = None
    for packet in _packets(opened, stream):
        if packet is not None and packet.pts is not None and packet.duration:
            end = max(end or 0, packet.pts + packet.duration)
        for frame in _frames(stream, packet):
            samples += frame.samples
            rate = frame.sample_rate
    if not rate:
        return (None if samples else Fraction(0)), None
    decoded = Fraction(samples, rate)
    if end is None or stream.time_base is None:
        return decoded, None
    return decoded, end * stream.time_base


def _packets(
    opened: av.container.InputContainer, stream: av.AudioStream
) -> Iterator[av.Packet[av.AudioStream] | None]:
    """Every packet of ``stream``, then ``None`` (drain the decoder): a file cut short
    ends where its readable data ends."""
    with suppress(av.error.FFmpegError):
        yield from opened.demux(stream)
    yield None


def _frames(
    stream: av.AudioStream, packet: av.Packet[av.AudioStream] | None
) -> list[av.AudioFrame]:
    if packet is not None and packet.pts is None and packet.size == 0:
        return []  # the demuxer's own drain packet: ``None`` drains once, below
    try:
        return stream.codec_context.decode(packet)
    except av.error.FFmpegError:
        return []  # a corrupt frame is skipped, as a player would
