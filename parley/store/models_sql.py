"""Models managed live: the rows behind ``ModelStore`` (``store/base.py``)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, select

from parley.domain.stored_models import StoredModel
from parley.store import records
from parley.store.base import Conflict, Missing
from parley.store.schema import models


def _values(model: StoredModel) -> dict[str, Any]:
    return {
        "name": model.name,
        "spec": json.dumps(model.spec, sort_keys=True),
        "prices": json.dumps(model.prices, sort_keys=True),
        "prices_from": model.prices_from,
        "next_prices": (
            json.dumps(model.next_prices, sort_keys=True) if model.next_prices is not None else None
        ),
        "next_prices_from": model.next_prices_from,
        "enabled": model.enabled,
        "created_at": model.created_at,
        "updated_at": model.updated_at,
    }


def list_models(conn: Connection) -> list[StoredModel]:
    rows = conn.execute(select(models).order_by(models.c.name)).mappings()
    return [records.model(row) for row in rows]


def add_model(conn: Connection, model: StoredModel) -> StoredModel:
    taken = conn.execute(select(models.c.id).where(models.c.name == model.name)).first()
    if taken is not None:
        raise Conflict(f"a model named `{model.name}` already exists")
    row = conn.execute(models.insert().values(_values(model)).returning(*models.c)).mappings().one()
    return records.model(row)


def replace_model(conn: Connection, model: StoredModel) -> StoredModel:
    """Write every field of the named model (its name and creation time kept)."""
    values = _values(model)
    values.pop("created_at")
    statement = (
        models.update().where(models.c.name == model.name).values(values).returning(*models.c)
    )
    row = conn.execute(statement).mappings().one_or_none()
    if row is None:
        raise Missing(f"there is no model named `{model.name}`")
    return records.model(row)


def delete_model(conn: Connection, name: str) -> bool:
    return bool(conn.execute(models.delete().where(models.c.name == name)).rowcount)
