"""What measuring one upload may cost, and how long a file of its size can last.

An upload is decoded to measure it, so its bytes decide the work: a FLAC of digital
silence holds hours in kilobytes, a file of needlessly tiny frames costs a decoder call
every few samples. ``DecodeBudget`` bounds both: the clip may last ``max_seconds`` (past
that, decoding stops at once: the clip is known too long), and decoding may take
``cpu_seconds`` of the thread's CPU time plus ``cpu_seconds_per_hour`` for each hour of
audio decoded so far (a common encoder's audio costs far less; a bomb far more).

``fewest_bytes_per_second`` is the least a second of a codec's audio takes (PCM at its
own rate, the others at ``MIN_SAMPLE_RATE``, their cheapest): a clip that measures
longer than its size can hold is refused, so no decoder quirk or forged frame header can
bill (or send an engine) more than the bytes carry. Nothing here imports PyAV.
"""

from __future__ import annotations

import re

from parley.domain.value import value

MIN_SAMPLE_RATE = 8000
"""The lowest sample rate accepted: telephone speech; nothing slower carries speech."""

_PCM_BITS = re.compile(r"pcm_[suf](8|16|24|32|64)")
_FEWEST_BYTES_PER_SECOND = {
    # MPEG audio: 8 kbit/s is the lowest bit rate its frame headers can state.
    "mp1": 1000.0,
    "mp1float": 1000.0,
    "mp2": 1000.0,
    "mp2float": 1000.0,
    "mp3": 1000.0,
    "mp3float": 1000.0,
    "gsm": 1625.0,  # 13 kbit/s, at 8 kHz only
    "gsm_ms": 1625.0,
    # Codecs that code silence in a byte or two a frame: only the duration limit bounds
    # them. AAC: 2,048 samples a frame (HE-AAC); Opus: 120 ms a packet; Vorbis: 4,096
    # new samples a packet; FLAC: 65,535 samples in a frame of 10 bytes.
    "aac": 4.0,
    "opus": 8.0,
    "libopus": 8.0,
    "vorbis": 2.0,
    "flac": 1.0,
}
ANY_CODEC_BYTES_PER_SECOND = 1.0
"""For a codec not listed: a byte a second, less than any listed codec needs."""


@value
class DecodeBudget:
    """The longest clip accepted, and the CPU time measuring one may take."""

    max_seconds: float = 7200.0
    cpu_seconds: float = 2.0
    cpu_seconds_per_hour: float = 20.0

    def cpu_allowed(self, decoded_seconds: float) -> float:
        """The CPU seconds a clip may have taken once ``decoded_seconds`` are decoded."""
        return self.cpu_seconds + self.cpu_seconds_per_hour * decoded_seconds / 3600

    @property
    def most_cpu(self) -> float:
        """The most CPU time any upload can take to measure."""
        return self.cpu_allowed(self.max_seconds)


DEFAULT_BUDGET = DecodeBudget()


def fewest_bytes_per_second(codec: str, channels: int, rate: int) -> float:
    """The least one second of ``codec`` audio takes; ``rate`` is the lowest sample
    rate its frames have (only sample-by-sample codecs depend on it)."""
    samples = max(rate, MIN_SAMPLE_RATE) * max(channels, 1)
    pcm = _PCM_BITS.match(codec)
    if pcm is not None:
        return samples * int(pcm.group(1)) / 8
    if codec in ("pcm_mulaw", "pcm_alaw"):
        return float(samples)  # a byte a sample
    if codec.startswith(("adpcm_", "g726")):
        return samples / 4  # two bits a sample at fewest
    return _FEWEST_BYTES_PER_SECOND.get(codec, ANY_CODEC_BYTES_PER_SECOND)


def longest_for_size(size: int, codec: str, channels: int, rate: int) -> float:
    """The longest a file of ``size`` bytes of ``codec`` can last, in seconds."""
    return size / fewest_bytes_per_second(codec, channels, rate)
