"""A realtime session's id, and how the request log finds a session's lines by it.

A session's id is ``rtsess_`` and 16 hex digits; every line it writes to the request log
(its turns, its input transcriptions, its refused turns) has the request id
``<session id>_<n>``, so the log finds a session's lines by that prefix, as it finds a
batch's (``domain/batches.py``).
"""

from __future__ import annotations

import secrets

PREFIX = "rtsess_"


def is_session_id(value: str) -> bool:
    """Whether ``value`` has the form of a session's id (``rtsess_`` and 16 hex digits)."""
    digits = value.removeprefix(PREFIX)
    return (
        value.startswith(PREFIX)
        and len(digits) == 16
        and all(c in "0123456789abcdef" for c in digits)
    )


def lines_prefix(session_id: str) -> str:
    """What the request ids of a session's lines start with, and no other's."""
    return f"{session_id}_"


def session_of(request_id: str) -> str | None:
    """The session whose line has this request id; None: not a realtime session's."""
    session_id, _, number = request_id.rpartition("_")
    return session_id if is_session_id(session_id) and number.isdecimal() else None


def new_session_id() -> str:
    return f"{PREFIX}{secrets.token_hex(8)}"
