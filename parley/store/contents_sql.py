"""Calls' kept content (``call_contents``), as queries on one open connection.

A row expired is not found, whether or not the purge has removed it yet. Content is
never summed into a rollup: no query outside this module reads the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, delete, select

from parley.domain.content import StoredContent
from parley.store.rows import columns, record
from parley.store.schema import call_contents

_table = call_contents


def save_contents(conn: Connection, contents: Sequence[StoredContent]) -> int:
    """Insert each row not stored yet: a batch written twice adds nothing twice."""
    if not contents:
        return 0
    # Each dialect's module loaded here, not at import (tests/unit/test_lean_worker.py).
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
    statement = insert(_table).on_conflict_do_nothing(index_elements=[_table.c.request_id])
    rows = [columns(content) for content in contents]
    return len(conn.execute(statement.returning(_table.c.request_id), rows).all())


def find_content(conn: Connection, request_id: str, now: datetime) -> StoredContent | None:
    query = select(_table).where(_table.c.request_id == request_id, _table.c.expires_at > now)
    row = conn.execute(query).mappings().first()
    return record(StoredContent, row) if row is not None else None


def purge_contents(conn: Connection, now: datetime, most: int) -> int:
    """Delete up to ``most`` expired rows (oldest expiry first): a purge holds the
    database's write lock for one bounded statement at a time."""
    expired = (
        select(_table.c.request_id)
        .where(_table.c.expires_at <= now)
        .order_by(_table.c.expires_at)
        .limit(most)
    )
    result = conn.execute(delete(_table).where(_table.c.request_id.in_(expired)))
    return result.rowcount or 0
