"""``whole_number``: ids and limits a caller wrote, read without ever raising."""

from __future__ import annotations

import pytest

from parley.domain.numbers import whole_number


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", 1),
        ("0042", 42),
        ("2147483647", 2_147_483_647),
        ("2147483648", None),  # past the highest
        ("0", None),  # below the lowest
        ("", None),
        ("-1", None),
        ("+1", None),
        (" 1", None),
        ("1.0", None),
        ("³", None),  # a digit to isdigit(), not to int()
        ("١٢", None),  # Arabic-Indic digits: int() reads them, an id has none
        ("1" * 5000, None),  # more digits than int() reads: no ValueError
        ("0" * 11, None),  # more digits than the highest has, whatever their value
    ],
)
def test_only_ascii_digits_within_the_bounds_are_a_number(raw: str, expected: int | None) -> None:
    assert whole_number(raw, 1, 2_147_483_647) == expected
