"""A stored response of the Responses API, as the store keeps it.

Its JSON parts are kept as the text they were written as (``response``, ``input_items``
and ``history``), so storing one costs one serialisation and reading one back never
re-encodes what the caller already has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

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
    """The earlier turns' items (their inputs and outputs, oldest first), JSON: what a
    later ``previous_response_id`` puts before this response's input and output."""
    created_at: datetime
    expires_at: datetime
