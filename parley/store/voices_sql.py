"""The clone registry (``voice_clones``), as queries on one open connection.

A clone is unique per model by its voice id (``uq_voice_clones_model_voice_id``); adding
one twice is a ``Conflict``.
"""

from __future__ import annotations

from sqlalchemy import Connection, RowMapping, delete, select
from sqlalchemy.exc import IntegrityError

from parley.domain.voices import Clone
from parley.store.base import Conflict
from parley.store.boundary import unique_violation
from parley.store.rows import columns, record
from parley.store.schema import voice_clones


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
    return [_clone(row) for row in conn.execute(query).mappings()]


def delete_clone(conn: Connection, model: str, voice_id: str) -> bool:
    statement = delete(voice_clones).where(
        voice_clones.c.model == model, voice_clones.c.voice_id == voice_id
    )
    return int(conn.execute(statement).rowcount) > 0


def _clone(row: RowMapping) -> Clone:
    return record(Clone, row)
