"""``@value``: an immutable record type that is cheap to build, for the records every
call builds (usage, limits, caller...).

A ``@dataclass(frozen=True)`` enforces immutability at run time by building every
instance through ``object.__setattr__``; ``@value`` keeps the guarantee in the type
checker (mypy treats these classes as frozen, so an assignment to a field is an error)
and builds plain slotted instances at run time. Instances hash by value, as frozen ones
do, so they can be dict keys.

The request path builds these records positionally, in their fields' order: a class
called with keywords first builds a dict of them. Both habits, and what they save, are
in docs/performance.md (Speed habits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def value(cls: type[_T]) -> type[_T]:
    return dataclass(slots=True, unsafe_hash=True)(cls)
