"""The rows both of a SQLite file's layers read, as the domain's records: one mapping,
used by the SQLAlchemy queries (``keys_sql.py``, ``channels_sql.py``, ``models_sql.py``,
``voices_sql.py``, ``batches_sql.py``, ``responses_sql.py``) and by the plain ``sqlite3``
ones a worker serves with (``sqlite_serving.py``), without SQLAlchemy.

A row is a mapping of column names to values as SQLAlchemy's types give them: timestamps
as aware UTC datetimes. The plain layer reads SQLite's text and turns the columns named
in ``TIMESTAMPS`` into datetimes first (``plain.utc_from_text``), as ``UtcDateTime`` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from parley.domain.batches import Batch
from parley.domain.channels import StoredChannel
from parley.domain.content import ContentLogging, content_policy
from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord
from parley.domain.responses import StoredResponse
from parley.domain.stored_models import StoredModel
from parley.domain.voices import Clone, PendingDeletion
from parley.store.plain import as_utc
from parley.store.rows import record

Row = Mapping[Any, Any]

COLUMNS: dict[str, tuple[str, ...]] = {
    "groups": (
        "id",
        "name",
        "rpm",
        "tpm",
        "models",
        "budget_nanos",
        "created_at",
        "updated_at",
        "disabled_at",
        "content_policy",
        "content_retention_days",
    ),
    "api_keys": (
        "id",
        "group_id",
        "name",
        "digest",
        "prefix",
        "created_at",
        "expires_at",
        "revoked_at",
        "rpm",
        "tpm",
        "updated_at",
        "last_used_at",
        "models",
        "budget_nanos",
        "previous_digest",
        "previous_until",
        "idempotency_key",
        "former_prefixes",
    ),
    "voice_clones": (
        "id",
        "group_id",
        "model",
        "label",
        "voice_id",
        "engine_name",
        "channel",
        "transcript",
        "consent",
        "duration_ms",
        "created_at",
    ),
    "voice_deletions": (
        "id",
        "group_id",
        "model",
        "label",
        "voice_id",
        "engine_name",
        "channel",
        "requested_at",
        "next_attempt_at",
        "attempts",
        "last_error",
        "last_attempt_at",
    ),
    "channels": (
        "id",
        "name",
        "spec",
        "api_key_sealed",
        "key_hint",
        "disabled_at",
        "created_at",
        "updated_at",
        "disabled_by",
    ),
    "models": (
        "id",
        "name",
        "spec",
        "prices",
        "prices_from",
        "next_prices",
        "next_prices_from",
        "enabled",
        "created_at",
        "updated_at",
    ),
    "batches": (
        "id",
        "group_id",
        "key_id",
        "endpoint",
        "input_file_id",
        "completion_window",
        "status",
        "metadata",
        "errors",
        "output_file_id",
        "error_file_id",
        "total",
        "completed",
        "failed",
        "created_at",
        "expires_at",
        "in_progress_at",
        "finalizing_at",
        "completed_at",
        "failed_at",
        "expired_at",
        "cancelling_at",
        "cancelled_at",
        "owner",
    ),
    "stored_responses": (
        "id",
        "group_id",
        "model",
        "response",
        "input_items",
        "history",
        "created_at",
        "expires_at",
        "previous_response_id",
        "deleted_at",
    ),
}
"""The columns of the tables read here, in ``schema.py``'s order: what the plain layer
selects, as ``select(table)`` does. A test holds it to ``schema.py``."""

TIMESTAMPS: dict[str, frozenset[str]] = {
    "groups": frozenset({"created_at", "updated_at", "disabled_at"}),
    "api_keys": frozenset(
        {"created_at", "expires_at", "revoked_at", "updated_at", "last_used_at", "previous_until"}
    ),
    "voice_clones": frozenset({"created_at"}),
    "voice_deletions": frozenset({"requested_at", "next_attempt_at", "last_attempt_at"}),
    "channels": frozenset({"disabled_at", "created_at", "updated_at"}),
    "models": frozenset({"prices_from", "next_prices_from", "created_at", "updated_at"}),
    "batches": frozenset(
        {
            "created_at",
            "expires_at",
            "in_progress_at",
            "finalizing_at",
            "completed_at",
            "failed_at",
            "expired_at",
            "cancelling_at",
            "cancelled_at",
        }
    ),
    "stored_responses": frozenset({"created_at", "expires_at", "deleted_at"}),
}
"""The ``UtcDateTime`` columns of the tables read here, by table: what SQLite keeps as
text and the plain layer turns into datetimes. A test holds it to ``schema.py``."""


def prefixes(stored: str | None) -> tuple[str, ...]:
    """A key's former prefixes, from their JSON array."""
    return () if stored is None else tuple(json.loads(stored))


def group(row: Row) -> Group:
    models = row["models"]
    return record(
        Group,
        row,
        quota=Quota(rpm=row["rpm"], tpm=row["tpm"]),
        models=None if models is None else frozenset(json.loads(models)),
        content=ContentLogging(
            content_policy(row["content_policy"]), row["content_retention_days"]
        ),
    )


def key(row: Row) -> KeyRecord:
    models = None if row["models"] is None else frozenset(json.loads(row["models"]))
    return record(
        KeyRecord,
        row,
        quota=Quota(rpm=row["rpm"], tpm=row["tpm"]),
        models=models,
        former_prefixes=prefixes(row["former_prefixes"]),
    )


def clone(row: Row) -> Clone:
    return record(Clone, row)


def deletion(row: Row) -> PendingDeletion:
    return record(PendingDeletion, row)


def channel(row: Row) -> StoredChannel:
    disabled = row["disabled_at"]
    return StoredChannel(
        name=row["name"],
        spec=json.loads(row["spec"]),
        api_key_sealed=row["api_key_sealed"],
        key_hint=row["key_hint"],
        disabled_at=as_utc(disabled) if disabled is not None else None,
        created_at=as_utc(row["created_at"]),
        updated_at=as_utc(row["updated_at"]),
        id=row["id"],
        disabled_by=row["disabled_by"],
    )


def model(row: Row) -> StoredModel:
    next_prices = row["next_prices"]
    next_from = row["next_prices_from"]
    return StoredModel(
        name=row["name"],
        spec=json.loads(row["spec"]),
        prices=json.loads(row["prices"]),
        prices_from=as_utc(row["prices_from"]),
        next_prices=json.loads(next_prices) if next_prices is not None else None,
        next_prices_from=as_utc(next_from) if next_from is not None else None,
        enabled=bool(row["enabled"]),
        created_at=as_utc(row["created_at"]),
        updated_at=as_utc(row["updated_at"]),
        id=row["id"],
    )


def batch(row: Row) -> Batch:
    """A batch: its fields are its table's columns, one for one."""
    return record(Batch, row)


def stored_response(row: Row) -> StoredResponse:
    """A stored response: its fields are its table's columns but ``deleted_at`` (a row
    read as a response is never a deleted one, unless read as an earlier turn)."""
    return record(StoredResponse, row)
