"""Streaming linear resampling of PCM16 (``audio.resample``)."""

from __future__ import annotations

import math
from array import array

import pytest

from parley.audio.resample import Resampler


def pcm(samples: list[int]) -> bytes:
    return array("h", samples).tobytes()


def samples(data: bytes) -> list[int]:
    return list(array("h", data))


@pytest.mark.parametrize(
    ("source", "target"), [(16_000, 24_000), (22_050, 24_000), (48_000, 24_000)]
)
def test_the_length_is_the_duration_at_the_new_rate(source: int, target: int) -> None:
    count = source // 3
    resampler = Resampler(source, target)
    out = resampler.feed(pcm([1000] * count)) + resampler.finish()
    assert len(out) // 2 == math.ceil(count * target / source)
    assert set(samples(out)) == {1000}


def test_values_lie_on_the_line_between_samples() -> None:
    resampler = Resampler(16_000, 24_000)  # three outputs for every two inputs
    out = samples(resampler.feed(pcm([0, 300, 600, 900])) + resampler.finish())
    assert out == [0, 200, 400, 600, 800, 900]


def test_pieces_of_any_size_give_the_same_audio() -> None:
    source = pcm([int(9000 * math.sin(i / 7)) for i in range(5000)])
    whole = Resampler(22_050, 24_000)
    expected = whole.feed(source) + whole.finish()
    cut = Resampler(22_050, 24_000)
    got = b"".join(cut.feed(source[i : i + 333]) for i in range(0, len(source), 333))
    assert got + cut.finish() == expected


def test_the_same_rate_passes_through() -> None:
    resampler = Resampler(24_000, 24_000)
    assert resampler.feed(b"\x01\x02\x03") == b"\x01\x02"
    assert resampler.feed(b"\x04") == b"\x03\x04"
    assert resampler.finish() == b""


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Resampler(0, 24_000)
