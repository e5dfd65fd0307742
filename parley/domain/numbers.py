"""Whole numbers read from text a caller wrote: path ids, query parameters, form fields."""

from __future__ import annotations


def whole_number(raw: str, low: int, high: int) -> int | None:
    """``raw`` as a whole number from ``low`` to ``high``, or ``None`` when it is not one.

    Only ASCII digits count, and never more of them than ``high`` has: ``int`` reads
    other scripts' digits, and refuses (with a ``ValueError``) more than 4,300 digits,
    which a long enough id would otherwise turn into a server error."""
    if not raw.isascii() or not raw.isdecimal() or len(raw) > len(str(high)):
        return None
    value = int(raw)
    return value if low <= value <= high else None
