"""Stored responses (``stored_responses``), as queries on one open connection.

Every read and delete names the group as well as the id: a response another group
stored is, to a caller, one that does not exist. An expired row is not found either,
whether or not pruning has removed it yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, RowMapping, delete, select

from parley.domain.responses import StoredResponse
from parley.store.schema import stored_responses

_table = stored_responses


def save_responses(conn: Connection, responses: Sequence[StoredResponse]) -> int:
    """Insert each response not stored yet: a replayed batch, or one whose first write
    was still committing when it was sent again (a flush cut short at shutdown), adds
    nothing twice and fails on nothing."""
    if not responses:
        return 0
    # Each dialect's module loaded here, not at import: a worker on SQLite never loads
    # PostgreSQL's (tests/unit/test_lean_worker.py).
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
    statement = insert(_table).on_conflict_do_nothing(index_elements=[_table.c.id])
    rows = [_row(response) for response in responses]
    return len(conn.execute(statement.returning(_table.c.id), rows).all())


def find_response(
    conn: Connection, response_id: str, group_id: int, now: datetime
) -> StoredResponse | None:
    query = select(_table).where(
        _table.c.id == response_id, _table.c.group_id == group_id, _table.c.expires_at > now
    )
    row = conn.execute(query).mappings().first()
    return _stored(row) if row is not None else None


def delete_response(conn: Connection, response_id: str, group_id: int) -> bool:
    statement = delete(_table).where(_table.c.id == response_id, _table.c.group_id == group_id)
    return int(conn.execute(statement).rowcount) > 0


def prune_responses(conn: Connection, now: datetime) -> int:
    return int(conn.execute(delete(_table).where(_table.c.expires_at <= now)).rowcount)


def _row(response: StoredResponse) -> dict[str, object]:
    return {
        "id": response.id,
        "group_id": response.group_id,
        "model": response.model,
        "response": response.response,
        "input_items": response.input_items,
        "history": response.history,
        "created_at": response.created_at,
        "expires_at": response.expires_at,
    }


def _stored(row: RowMapping) -> StoredResponse:
    return StoredResponse(
        id=row["id"],
        group_id=row["group_id"],
        model=row["model"],
        response=row["response"],
        input_items=row["input_items"],
        history=row["history"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )
