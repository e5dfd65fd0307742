"""A stored response of the Responses API, as the store keeps it.

Its JSON parts are kept as the text they were written as (``response``, ``input_items``
and ``history``), so storing one costs one serialisation and reading one back never
re-encodes what the caller already has.

A turn that continues another (``previous_response_id``) keeps only its own input and
output and names the turn it continues, so a conversation's storage grows with its
length; its history is read back by following the names, newest first, at most
``TURNS_PER_COPY`` turns. Every ``TURNS_PER_COPY``-th turn keeps a copy of its earlier
turns' items instead (``history``) and names none, which bounds that walk at the cost of
one copy per ``TURNS_PER_COPY`` turns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

TURNS_PER_COPY = 500
"""The most stored turns a conversation's history is read across (one query)."""
RESPONSE_ID = re.compile(r"resp_[A-Za-z0-9_-]{1,95}")
"""What a stored response's id can be: ``resp_`` and up to 95 letters, digits, ``_`` or
``-`` (Parley's ``resp_`` and 48 hex digits, and the ids native upstreams give), at most
the 100 characters the store's column holds."""


def is_response_id(text: str) -> bool:
    """Whether ``text`` can be the id of a stored response. Anything else (a NUL byte, a
    space, a slash, an id too long for the store) is unknown without asking the store, so
    SQLite and PostgreSQL answer it alike: not found."""
    return RESPONSE_ID.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str
    """``resp_...``, the id the caller was given."""
    group_id: int
    """The group whose caller created it: the only one that may read or delete it."""
    model: str
    response: str
    """The ``response`` object, JSON."""
    input_items: str
    """This request's input items, each with its id, JSON (what ``input_items`` lists)."""
    history: str
    """A copy of the earlier turns' items (their inputs and outputs, oldest first), JSON,
    put before this response's input and output when it is continued; ``[]`` in a turn
    that names the one it continues instead."""
    created_at: datetime
    expires_at: datetime
    previous_response_id: str | None = None
    """The stored turn this one continues, whose history comes before it."""
