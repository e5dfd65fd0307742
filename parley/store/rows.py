"""Rows to records and back, by name: a record's field is the column of the same name.

The store's records (``Group``, ``KeyRecord``, ``Clone``, ``UsageRecord``...) are frozen
dataclasses whose fields are named as their table's columns, so one pair of functions
maps every one of them; a field stored another way (a ``Quota`` as ``rpm`` and ``tpm``, a
set as JSON) is given by the caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def _names(kind: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(kind))


def record(kind: type[T], row: Mapping[Any, Any], **given: Any) -> T:
    """A ``kind`` made from ``row``: each field from its column, unless ``given``."""
    found = {name: row[name] for name in _names(kind) if name not in given}
    return kind(**found, **given)


def columns(value: object, **given: Any) -> dict[str, Any]:
    """The column values of a record: each field under its name, then ``given`` (which
    adds columns or replaces a field's)."""
    return {**{name: getattr(value, name) for name in _names(type(value))}, **given}
