"""``@value``: an immutable record type that is cheap to build.

A ``@dataclass(frozen=True)`` enforces immutability at run time by building every
instance through ``object.__setattr__``, which makes each instance several times as
costly to build, and a request builds about ten such records (usage, limits,
caller...). ``@value`` keeps the guarantee where it is cheap, in the type
checker (mypy treats these classes as frozen, so an assignment to a field is an error),
and builds plain slotted instances at run time. Instances hash by value, as frozen
ones do, so they can be dict keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def value(cls: type[_T]) -> type[_T]:
    return dataclass(slots=True, unsafe_hash=True)(cls)
