"""Stored responses (``stored_responses``), as queries on one open connection.

Every read and delete names the group as well as the id: a response another group
stored is, to a caller, one that does not exist. An expired or deleted row is not found
by its id either, whether or not pruning has removed it yet; it is still read as an
earlier turn of a later one that continues it (``find_turns``), and pruned only once no
row continues it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    delete,
    exists,
    literal,
    select,
    update,
)

from parley.domain.responses import TURNS_PER_COPY, StoredResponse
from parley.store.records import stored_response
from parley.store.schema import stored_responses

_table = stored_responses
PRUNE_ROUNDS = TURNS_PER_COPY + 1
"""A prune removes a conversation's turns from its newest back, one turn each round."""


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
    query = select(_table).where(_found(response_id, group_id, now))
    row = conn.execute(query).mappings().first()
    return stored_response(row) if row is not None else None


def find_turns(
    conn: Connection, response_id: str, group_id: int, now: datetime, most: int
) -> list[StoredResponse]:
    """The group's response with this id (unexpired, not deleted) and the turns it
    continues, newest first, at most ``most``; ``[]`` when there is no such response.

    One recursive query, on SQLite and PostgreSQL alike: each step looks up the
    previous turn by its primary key."""
    first = select(_table.c.id, _table.c.previous_response_id, literal(1).label("depth"))
    chain = first.where(_found(response_id, group_id, now)).cte("chain", recursive=True)
    earlier = _table.alias("earlier")
    chain = chain.union_all(
        select(earlier.c.id, earlier.c.previous_response_id, chain.c.depth + 1).where(
            earlier.c.id == chain.c.previous_response_id,
            earlier.c.group_id == group_id,
            chain.c.depth < most,
        )
    )
    query = select(_table).join(chain, chain.c.id == _table.c.id).order_by(chain.c.depth)
    return [stored_response(row) for row in conn.execute(query).mappings()]


def delete_response(conn: Connection, response_id: str, group_id: int, now: datetime) -> bool:
    """Delete the group's response (``False`` when it has none): at once, or, while a
    later turn continues it, hidden (``deleted_at``) and pruned after that turn."""
    hide = update(_table).where(
        _table.c.id == response_id, _table.c.group_id == group_id, _table.c.deleted_at.is_(None)
    )
    if not conn.execute(hide.values(deleted_at=now)).rowcount:
        return False
    conn.execute(delete(_table).where(_table.c.id == response_id, _unreferenced()))
    return True


def prune_responses(conn: Connection, now: datetime) -> int:
    """Delete every expired or deleted response no other continues: a conversation goes
    from its newest turn back, its earlier turns kept while a later one is kept."""
    gone = (_table.c.expires_at <= now) | _table.c.deleted_at.is_not(None)
    pruned = 0
    for _ in range(PRUNE_ROUNDS):
        count = int(conn.execute(delete(_table).where(gone, _unreferenced())).rowcount)
        pruned += count
        if not count:
            break
    return pruned


def _found(response_id: str, group_id: int, now: datetime) -> ColumnElement[bool]:
    return and_(
        _table.c.id == response_id,
        _table.c.group_id == group_id,
        _table.c.expires_at > now,
        _table.c.deleted_at.is_(None),
    )


def _unreferenced() -> ColumnElement[bool]:
    """No stored response continues this one."""
    later = _table.alias("later")
    return ~exists().where(later.c.previous_response_id == _table.c.id)


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
        "previous_response_id": response.previous_response_id,
    }
