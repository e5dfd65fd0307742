"""Decoding a clip with PyAV to measure it (``probe`` imports this on first use).

A header's claim is never used alone: a streamed WAV's sizes are placeholders (0 or
0xFFFFFFFF), a truncated or forged MP3 keeps its Xing frame count, an Ogg file's last
granule can say anything, and an MP3 or FLAC may change its sample rate from one frame
to the next. The duration is the sum of every decoded frame's own samples over its own
rate, and no more than the end of the last packet's timestamp where the container has
timestamps (that trims the encoder padding a decoder still emits for AAC, for example).

Decoding spends a ``DecodeBudget`` and stops the moment the clip is known to be too long
or too costly, or nobody waits for it any more (``stop``); a clip longer than its size
can hold for its codec, or slower than ``MIN_SAMPLE_RATE``, is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from fractions import Fraction
from typing import IO

import av
import av.container

from parley.audio.budget import MIN_SAMPLE_RATE, DecodeBudget, longest_for_size
from parley.audio.errors import AudioTooCostly, AudioTooLong, EmptyAudio, NotAudio, ProbeStopped
from parley.audio.info import AudioInfo
from parley.audio.sniff import Container


def measure(
    file: IO[bytes],
    container: Container,
    size: int,
    budget: DecodeBudget,
    stop: threading.Event | None = None,
) -> AudioInfo:
    """The clip's duration by decoding ``file`` (``size`` bytes from where it is)."""
    try:
        with av.open(file, mode="r", format=container.demuxer, metadata_errors="ignore") as opened:
            if not opened.streams.audio:
                raise NotAudio(f"the {container} file has no audio track")
            stream = opened.streams.audio[0]
            context = stream.codec_context
            if context is None:  # a codec FFmpeg does not know, or none at all
                raise NotAudio(f"the {container} file's audio is in no codec Parley can decode")
            tally = _Tally(budget, stop)
            packet_end = _decode(opened, stream, context, tally)
            codec, channels, rate = context.name, context.channels, context.sample_rate
    except (av.error.FFmpegError, ValueError) as exc:  # ValueError: PyAV on a broken file
        raise NotAudio(f"the {container} data cannot be decoded") from exc
    if not tally.frames:
        raise (EmptyAudio("the audio lasts 0 seconds") if rate else _undecodable(container))
    decoded = tally.exact_seconds()
    seconds = float(decoded if packet_end is None else min(decoded, packet_end))
    if seconds <= 0:
        raise EmptyAudio("the audio lasts 0 seconds")
    longest = longest_for_size(size, codec, channels, tally.lowest_rate)
    if seconds > longest:
        raise NotAudio(
            f"{size} bytes of {codec} cannot last {seconds:.0f} seconds (at most {longest:.0f})"
        )
    return AudioInfo(container, codec, rate or tally.lowest_rate, channels, seconds)


def _undecodable(container: Container) -> NotAudio:
    return NotAudio(f"the {container} data cannot be decoded")


class _Tally:
    """The frames decoded so far, summed by their own rates, and the budget they spend."""

    def __init__(self, budget: DecodeBudget, stop: threading.Event | None) -> None:
        self.frames = 0
        self.lowest_rate = 0
        self._budget = budget
        self._stop = stop
        self._seconds = 0.0
        self._samples: dict[int, int] = {}
        self._cpu_start = time.thread_time()

    def add(self, frame: av.AudioFrame) -> None:
        rate = frame.sample_rate
        if rate < MIN_SAMPLE_RATE:
            raise NotAudio(
                f"a frame's sample rate is {rate} Hz; the lowest accepted is {MIN_SAMPLE_RATE} Hz"
            )
        self.frames += 1
        self.lowest_rate = rate if not self.lowest_rate else min(rate, self.lowest_rate)
        self._samples[rate] = self._samples.get(rate, 0) + frame.samples
        self._seconds += frame.samples / rate
        if self._seconds > self._budget.max_seconds:
            raise AudioTooLong(self._budget.max_seconds)

    def spend(self) -> None:
        """Called before each packet: stop if the clip has cost too much, or is abandoned."""
        if self._stop is not None and self._stop.is_set():
            raise ProbeStopped
        allowed = self._budget.cpu_allowed(self._seconds)
        if time.thread_time() - self._cpu_start > allowed:
            raise AudioTooCostly(allowed)

    def exact_seconds(self) -> Fraction:
        return sum((Fraction(n, rate) for rate, n in self._samples.items()), Fraction(0))


def _decode(
    opened: av.container.InputContainer,
    stream: av.AudioStream,
    context: av.AudioCodecContext,
    tally: _Tally,
) -> Fraction | None:
    """Decode every packet into ``tally``; the end of the last timestamped packet, in
    seconds, if the container has timestamps."""
    end: int | None = None
    for packet in _packets(opened, stream):
        tally.spend()
        if packet is not None and packet.pts is not None and packet.duration:
            end = max(end or 0, packet.pts + packet.duration)
        for frame in _frames(context, packet):
            tally.add(frame)
    if end is None or stream.time_base is None:
        return None
    return end * stream.time_base


def _packets(
    opened: av.container.InputContainer, stream: av.AudioStream
) -> Iterator[av.Packet[av.AudioStream] | None]:
    """Every packet of ``stream``, then ``None`` (drain the decoder): a file cut short
    ends where its readable data ends."""
    with suppress(av.error.FFmpegError):
        yield from opened.demux(stream)
    yield None


def _frames(
    context: av.AudioCodecContext, packet: av.Packet[av.AudioStream] | None
) -> list[av.AudioFrame]:
    if packet is not None and packet.pts is None and packet.size == 0:
        return []  # the demuxer's own drain packet: ``None`` drains once, below
    try:
        return context.decode(packet)
    except av.error.FFmpegError:
        return []  # a corrupt frame is skipped, as a player would
