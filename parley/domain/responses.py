"""A stored response of the Responses API, as the store keeps it.

Its JSON parts are kept as the text they were written as (``response``, ``input_items``
and ``history``), so storing one costs one serialisation and reading one back never
re-encodes what the caller already has.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


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
