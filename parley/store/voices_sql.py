"""The clone registry (``voice_clones``) and the deletions still to do on the engines
(``voice_deletions``), as queries on one open connection.

A clone is unique per model by its voice id (``uq_voice_clones_model_voice_id``); adding
one twice is a ``Conflict``. Retiring a clone moves it from the registry to the
deletions in one transaction, so it is never in both nor in neither. An attempt at the
engine starts by claiming its row (``claim_deletion``: moving ``next_attempt_at`` ahead
while it is still due), which at most one worker or instance wins.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from sqlalchemy import Connection, delete, select, update
from sqlalchemy.exc import IntegrityError

from parley.domain.voices import Clone, PendingDeletion
from parley.store.base import Conflict
from parley.store.boundary import unique_violation
from parley.store.records import clone, deletion
from parley.store.rows import columns
from parley.store.schema import voice_clones, voice_deletions


def add_clone(conn: Connection, clone: Clone) -> Clone:
    values = columns(clone)
    try:
        with conn.begin_nested():
            conn.execute(voice_clones.insert().values(values))
    except IntegrityError as error:
        if not unique_violation(error):
            raise  # not the voice id: a fault (``store.boundary``)
        raise Conflict(f"the voice `{clone.voice_id}` already exists") from error
    return clone


def list_clones(conn: Connection, model: str | None, group_id: int | None) -> list[Clone]:
    query = select(voice_clones).order_by(voice_clones.c.id)
    if model is not None:
        query = query.where(voice_clones.c.model == model)
    if group_id is not None:
        query = query.where(voice_clones.c.group_id == group_id)
    return [clone(row) for row in conn.execute(query).mappings()]


def delete_clone(conn: Connection, model: str, voice_id: str) -> bool:
    statement = delete(voice_clones).where(
        voice_clones.c.model == model, voice_clones.c.voice_id == voice_id
    )
    return int(conn.execute(statement).rowcount) > 0


# deletions still to do on the engines


def retire_clone(
    conn: Connection, clone: Clone, requested_at: datetime, claimed_until: datetime
) -> PendingDeletion | None:
    """Take the clone out of the registry and record its engine copy as still to delete,
    claimed until ``claimed_until`` (for the attempt its deleter makes at once); ``None``
    when the registry no longer had it (deleted meanwhile, by another request)."""
    if not delete_clone(conn, clone.model, clone.voice_id):
        return None
    pending = PendingDeletion(
        group_id=clone.group_id,
        model=clone.model,
        label=clone.label,
        voice_id=clone.voice_id,
        engine_name=clone.engine_name,
        channel=clone.channel,
        requested_at=requested_at,
        next_attempt_at=claimed_until,
    )
    values = columns(pending)
    del values["id"]
    inserted = conn.execute(voice_deletions.insert().values(values))
    (row_id,) = inserted.inserted_primary_key or (0,)
    return replace(pending, id=int(row_id))


def list_deletions(
    conn: Connection, model: str | None, group_id: int | None
) -> list[PendingDeletion]:
    query = select(voice_deletions).order_by(voice_deletions.c.id)
    if model is not None:
        query = query.where(voice_deletions.c.model == model)
    if group_id is not None:
        query = query.where(voice_deletions.c.group_id == group_id)
    return [deletion(row) for row in conn.execute(query).mappings()]


def find_deletion(conn: Connection, deletion_id: int) -> PendingDeletion | None:
    query = select(voice_deletions).where(voice_deletions.c.id == deletion_id)
    row = conn.execute(query).mappings().first()
    return deletion(row) if row is not None else None


def claim_deletion(
    conn: Connection, deletion_id: int, now: datetime, until: datetime, *, due: bool
) -> PendingDeletion | None:
    """Hold the deletion until ``until`` for an attempt starting ``now``: only while it is
    due (``next_attempt_at <= now``) unless ``due`` is False (an operator's retry).
    ``None`` when another claim won, or the row is gone."""
    statement = update(voice_deletions).where(voice_deletions.c.id == deletion_id)
    if due:
        statement = statement.where(voice_deletions.c.next_attempt_at <= now)
    if int(conn.execute(statement.values(next_attempt_at=until)).rowcount) == 0:
        return None
    return find_deletion(conn, deletion_id)


def deletion_failed(
    conn: Connection, deletion_id: int, error: str, at: datetime, next_at: datetime
) -> PendingDeletion | None:
    """Count a failed attempt, its error and when the next may start; ``None`` when the
    row is gone (done by another attempt, or given up)."""
    statement = (
        update(voice_deletions)
        .where(voice_deletions.c.id == deletion_id)
        .values(
            attempts=voice_deletions.c.attempts + 1,
            last_error=error,
            last_attempt_at=at,
            next_attempt_at=next_at,
        )
    )
    if int(conn.execute(statement).rowcount) == 0:
        return None
    return find_deletion(conn, deletion_id)


def finish_deletion(conn: Connection, deletion_id: int) -> bool:
    """Forget a deletion (done at the engine, or given up); False when there was none."""
    statement = delete(voice_deletions).where(voice_deletions.c.id == deletion_id)
    return int(conn.execute(statement).rowcount) > 0
