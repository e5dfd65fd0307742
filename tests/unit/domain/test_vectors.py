"""Embedding vectors between OpenAI's two encodings (``parley.domain.vectors``)."""

from __future__ import annotations

import base64
import struct

import pytest

from parley.domain.vectors import NotAVector, base64_of, encoded, floats_of

NUMBERS = [0.5, -1.25, 3.0, 0.0]
PACKED = base64.b64encode(struct.pack("<4f", *NUMBERS)).decode()


def test_numbers_become_little_endian_float32_base64_and_back() -> None:
    assert base64_of(NUMBERS) == PACKED
    assert floats_of(PACKED) == NUMBERS
    assert encoded(NUMBERS, "base64") == PACKED
    assert encoded(PACKED, "float") == NUMBERS


def test_a_vector_already_in_the_asked_encoding_is_passed_as_it_is() -> None:
    assert encoded(NUMBERS, "float") is NUMBERS
    assert encoded(PACKED, "base64") is PACKED


def test_float32_rounding_is_the_only_change() -> None:
    (back,) = floats_of(base64_of([0.1]))
    assert back == pytest.approx(0.1, abs=1e-7)
    assert back == struct.unpack("<f", struct.pack("<f", 0.1))[0]


@pytest.mark.parametrize(
    ("vector", "encoding"),
    [
        ("not base64!", "float"),
        (base64.b64encode(b"abc").decode(), "float"),  # 3 bytes: no whole float32
        ([1.0, "x"], "base64"),
        ([1e300], "base64"),
        ({"a": 1}, "float"),
        (None, "base64"),
    ],
)
def test_what_is_not_a_vector_is_refused(vector: object, encoding: str) -> None:
    with pytest.raises(NotAVector):
        encoded(vector, encoding)  # type: ignore[arg-type]
