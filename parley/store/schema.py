"""The tables, as SQLAlchemy Core ``Table`` objects (the migrations create them).

Every timestamp column is ``UtcDateTime``: it accepts and returns timezone-aware UTC
datetimes on both backends (SQLite keeps no zone, so values are normalised to UTC before
they are written and marked UTC when they are read; its fixed-width text form then sorts
in time order). Money is integer nano-dollars in ``BIGINT`` columns.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Dialect,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.sql.expression import true
from sqlalchemy.types import TypeDecorator

from parley.store.plain import ROLLUP_TOTALS, as_utc

metadata = MetaData()


class UtcDateTime(TypeDecorator[datetime]):
    """A ``DateTime(timezone=True)`` that only ever holds aware UTC datetimes.

    A naive datetime is taken to be UTC already.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


groups = Table(
    "groups",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("rpm", Integer),
    Column("tpm", Integer),
    Column("models", Text),  # JSON array of public model names; NULL means every model
    Column("budget_nanos", BigInteger),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("disabled_at", UtcDateTime),
    Column("content_policy", String(20), nullable=False, server_default="off"),
    Column("content_retention_days", Integer, nullable=False, server_default="30"),
    UniqueConstraint("name", name="uq_groups_name"),
    sqlite_autoincrement=True,
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("group_id", Integer, nullable=False),
    Column("name", String(200), nullable=False),
    Column("digest", String(64), nullable=False),  # hex SHA-256 of the key
    Column("prefix", String(32), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime),
    Column("revoked_at", UtcDateTime),
    Column("rpm", Integer),
    Column("tpm", Integer),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("last_used_at", UtcDateTime),
    Column("models", Text),  # JSON array within the group's; NULL means the group's
    Column("budget_nanos", BigInteger),  # the key's own limit per period, on top of the group's
    Column("previous_digest", String(64)),  # the secret a rotation replaced, in its grace
    Column("previous_until", UtcDateTime),
    Column("idempotency_key", String(64)),  # what the request that created it said, if any
    Column("former_prefixes", Text),  # JSON array, newest first: secrets rotations replaced
    ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_api_keys_group_id"),
    UniqueConstraint("digest", name="uq_api_keys_digest"),
    Index("ix_api_keys_updated_at", "updated_at"),
    Index("ix_api_keys_previous_digest", "previous_digest"),
    Index("uq_api_keys_idempotency_key", "idempotency_key", unique=True),
    sqlite_autoincrement=True,
)

FAILED_ONLY = "status >= 400"
"""The partial index's condition: a query that names it exactly (SQLite matches the text)
can read failed calls and refusals without scanning the successes."""

usage_records = Table(
    "usage_records",
    metadata,
    Column("request_id", String(200), primary_key=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("group_id", Integer, nullable=False),
    Column("key_id", Integer, nullable=False),
    Column("model", String(200), nullable=False),
    Column("channel", String(200), nullable=False),
    Column("endpoint", String(200), nullable=False),
    Column("status", Integer, nullable=False),
    Column("latency_ms", Integer, nullable=False),
    Column("prompt_tokens", BigInteger, nullable=False),
    Column("completion_tokens", BigInteger, nullable=False),
    Column("characters", BigInteger, nullable=False),
    Column("audio_ms", BigInteger, nullable=False),
    Column("cost_nanos", BigInteger, nullable=False),
    Column("estimated", Boolean, nullable=False),
    Column("cached_tokens", BigInteger, nullable=False, server_default="0"),
    Column("cache_write_tokens", BigInteger, nullable=False, server_default="0"),
    # the request log's own columns (docs/admin-api.md, Request log)
    Column("model_requested", String(200), nullable=False, server_default=""),
    Column("error_code", String(100)),
    Column("first_byte_ms", Integer),
    Column("admitted", Boolean, nullable=False, server_default=true()),
    Column("request_count", Integer, nullable=False, server_default="1"),
    Column("search_units", BigInteger, nullable=False, server_default="0"),
    Column("key_prefix", String(32)),  # the prefix of the secret that made the call
    Column("error_detail", String(600)),  # why a failed call failed (redacted)
    Column("price", Text),  # the unit prices the call was billed at (``Price.tag``)
    Index("ix_usage_records_created_at", "created_at"),
    Index("ix_usage_records_group_id_created_at", "group_id", "created_at"),
    # Failures and refusals also have a partial index on (status, created_at) where
    # FAILED_ONLY holds, made by migration 0005. It is not declared here: its dialect
    # options would load SQLAlchemy's PostgreSQL dialect into every SQLite worker.
)

usage_daily = Table(
    "usage_daily",
    metadata,
    Column("group_id", Integer, primary_key=True),
    Column("day", Date, primary_key=True),
    Column("model", String(200), primary_key=True),
    *(Column(name, BigInteger, nullable=False, server_default="0") for name in ROLLUP_TOTALS),
)

usage_daily_keys = Table(
    "usage_daily_keys",
    metadata,
    Column("key_id", Integer, primary_key=True),
    Column("day", Date, primary_key=True),
    Column("model", String(200), primary_key=True),
    Column("group_id", Integer, nullable=False),
    *(Column(name, BigInteger, nullable=False, server_default="0") for name in ROLLUP_TOTALS),
)
"""The same sums as ``usage_daily``, per key: what per-key reports and budgets read."""

voice_clones = Table(
    "voice_clones",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("group_id", Integer, nullable=False),
    Column("model", String(200), nullable=False),  # the public model name
    Column("label", String(200), nullable=False),  # as the caller gave it
    Column("voice_id", String(300), nullable=False),  # g<group>__<label>, what callers use
    Column("engine_name", String(300), nullable=False),  # the engine's spelling of the name
    Column("channel", String(200), nullable=False),  # the channel that holds the clone
    Column("transcript", Text),
    Column("consent", String(300)),  # as the caller sent it (OpenAI: a consent recording id)
    Column("duration_ms", Integer, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_voice_clones_group_id"),
    UniqueConstraint("model", "voice_id", name="uq_voice_clones_model_voice_id"),
    Index("ix_voice_clones_group_id", "group_id"),
    sqlite_autoincrement=True,
)

voice_deletions = Table(
    "voice_deletions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("group_id", Integer, nullable=False),
    Column("model", String(200), nullable=False),
    Column("label", String(200), nullable=False),
    Column("voice_id", String(300), nullable=False),
    Column("engine_name", String(300), nullable=False),
    Column("channel", String(200), nullable=False),
    Column("requested_at", UtcDateTime, nullable=False),
    Column("next_attempt_at", UtcDateTime, nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("last_error", Text),  # credentials removed before it is written
    Column("last_attempt_at", UtcDateTime),
    Index("ix_voice_deletions_model_voice_id", "model", "voice_id"),
    Index("ix_voice_deletions_next_attempt_at", "next_attempt_at"),
    sqlite_autoincrement=True,
)
"""Clones deleted in Parley whose engine copy is still to delete (``voices/deletions.py``);
a row goes when the engine says the voice is gone, or when an operator gives up."""
call_contents = Table(
    "call_contents",
    metadata,
    Column("request_id", String(200), primary_key=True),  # the usage record's
    Column("group_id", Integer, nullable=False),  # the group whose call it was
    Column("policy", String(20), nullable=False),  # metadata, redacted or full
    Column("sealed", Boolean, nullable=False),  # body sealed (parley/credentials.py)
    Column("body", Text, nullable=False),  # JSON, or its sealed token; never in a rollup
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),  # purged after
    Index("ix_call_contents_expires_at", "expires_at"),
)
"""Calls' content a group's policy keeps (``domain/content.py``)."""

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("actor", String(200), nullable=False),  # "token" or "session:<id prefix>"
    Column("address", String(200), nullable=False),  # the client address
    Column("action", String(200), nullable=False),  # e.g. group.create, key.revoke
    Column("target", String(300), nullable=False),  # what it acted on, never a secret
    Column("detail", Text, nullable=False),  # JSON, never a secret
    Index("ix_audit_log_created_at", "created_at"),
    sqlite_autoincrement=True,
)

channels = Table(
    "channels",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("spec", Text, nullable=False),  # JSON: the channel's settings but its credential
    Column("api_key_sealed", Text),  # the credential, encrypted (parley/credentials.py)
    Column("key_hint", String(32)),  # its last characters, for the operator to recognise
    Column("disabled_at", UtcDateTime),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("disabled_by", String(200)),  # an administrator, or "health-check"
    UniqueConstraint("name", name="uq_channels_name"),
    sqlite_autoincrement=True,
)

models = Table(
    "models",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("spec", Text, nullable=False),  # JSON: kind, aliases..., channels (no prices)
    Column("prices", Text, nullable=False),  # JSON: the config's price fields, USD strings
    Column("prices_from", UtcDateTime, nullable=False),  # when those prices took effect
    Column("next_prices", Text),  # JSON: a scheduled change, if any
    Column("next_prices_from", UtcDateTime),  # the instant it takes effect
    Column("enabled", Boolean, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    UniqueConstraint("name", name="uq_models_name"),
    sqlite_autoincrement=True,
)
"""Models managed live (``store/models_sql.py``); the config file's are not stored."""

channel_events = Table(
    "channel_events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("channel", String(200), nullable=False),
    Column("model", String(200), nullable=False),  # "" for the whole channel
    Column("kind", String(20), nullable=False),  # "breaker", "test" or "check"
    Column("state", String(20), nullable=False),  # open/half_open/closed, or ok/failed
    Column("status", Integer),  # a test's HTTP status
    Column("latency_ms", Integer),
    Column("message", Text, nullable=False),  # the upstream's error, redacted; never a secret
    Column("actor", String(200), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Index("ix_channel_events_channel_id", "channel", "id"),
    sqlite_autoincrement=True,
)

admin_accounts = Table(
    "admin_accounts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(64), nullable=False),
    Column("role", String(20), nullable=False),  # owner, operator, viewer or group-admin
    Column("password_hash", String(300), nullable=False),  # scrypt (parley/admin/passwords.py)
    Column("disabled_at", UtcDateTime),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("sso_subject", String(600)),  # "<issuer> <sub>" of single sign-on, if bound
    Column("group_id", Integer),  # a group-admin's group; NULL for every other role
    UniqueConstraint("name", name="uq_admin_accounts_name"),
    UniqueConstraint("sso_subject", name="uq_admin_accounts_sso_subject"),
    ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_admin_accounts_group_id"),
    sqlite_autoincrement=True,
)

stored_responses = Table(
    "stored_responses",
    metadata,
    Column("id", String(100), primary_key=True),  # resp_..., as the caller knows it
    Column("group_id", Integer, nullable=False),  # the only group that may read it
    Column("model", String(200), nullable=False),  # the public model name
    Column("response", Text, nullable=False),  # JSON: the response object
    Column("input_items", Text, nullable=False),  # JSON: this request's input, with ids
    # JSON: a copy of the earlier turns' items, in a row that names no previous response
    # (stored before 0010, or a turn that starts a new stretch of a long conversation)
    Column("history", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("previous_response_id", String(100)),  # the turn it continues, read from there
    Column("deleted_at", UtcDateTime),  # deleted, kept while a later turn continues it
    ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_stored_responses_group_id"),
    Index("ix_stored_responses_expires_at", "expires_at"),
    Index("ix_stored_responses_previous_response_id", "previous_response_id"),
)


files = Table(
    "files",
    metadata,
    Column("id", String(40), primary_key=True),  # file-<24 hex>, in creation order
    Column("group_id", Integer, nullable=False),  # the only group that may see it
    Column("filename", String(255), nullable=False),
    Column("purpose", String(40), nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime),
    ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_files_group_id"),
    Index("ix_files_group_id_id", "group_id", "id"),
    Index("ix_files_expires_at", "expires_at"),
)

file_chunks = Table(
    "file_chunks",
    metadata,
    Column("file_id", String(40), primary_key=True),  # written before its ``files`` row
    Column("seq", Integer, primary_key=True),  # 0, 1, ... in the file's order
    Column("data", LargeBinary, nullable=False),
)


batches = Table(
    "batches",
    metadata,
    Column("id", String(40), primary_key=True),  # batch_<24 hex>, in creation order
    Column("group_id", Integer, nullable=False),  # the only group that may see it
    Column("key_id", Integer, nullable=False),  # the key its lines are called with
    Column("endpoint", String(40), nullable=False),
    Column("input_file_id", String(40), nullable=False),
    Column("completion_window", String(10), nullable=False),
    Column("status", String(20), nullable=False),
    Column("metadata", Text),  # JSON, as the caller gave it
    Column("errors", Text),  # JSON: the input file's problems, by line
    Column("output_file_id", String(40)),
    Column("error_file_id", String(40)),
    Column("total", Integer, nullable=False),
    Column("completed", Integer, nullable=False),
    Column("failed", Integer, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("in_progress_at", UtcDateTime),
    Column("finalizing_at", UtcDateTime),
    Column("completed_at", UtcDateTime),
    Column("failed_at", UtcDateTime),
    Column("expired_at", UtcDateTime),
    Column("cancelling_at", UtcDateTime),
    Column("cancelled_at", UtcDateTime),
    Column("owner", String(40)),  # the lane ending it (writing its results), once one does
    ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_batches_group_id"),
    Index("ix_batches_group_id_id", "group_id", "id"),
    Index("ix_batches_status", "status"),
)

batch_lines = Table(
    "batch_lines",
    metadata,
    Column("batch_id", String(40), primary_key=True),
    Column("line", Integer, primary_key=True),  # its line number in the input file, from 1
    Column("custom_id", String(200), nullable=False),
    Column("body", Text, nullable=False),  # the request body, as the caller wrote it
    # queued → claimed (taken by a lane) → sent (recorded before the call) → done or
    # failed; or cancelled or expired, never sent
    Column("state", String(10), nullable=False),
    Column("result", Text),  # the output or error file's line, once known
    Column("owner", String(40)),  # the lane that took it (claimed or sent)
    Index("ix_batch_lines_state", "batch_id", "state"),
)

batch_lanes = Table(
    "batch_lanes",
    metadata,
    Column("id", String(40), primary_key=True),  # a running lane, one per instance
    Column("expires_at", UtcDateTime, nullable=False),  # alive until then, renewed
)

realtime_client_secrets = Table(
    "realtime_client_secrets",
    metadata,
    Column("digest", String(64), primary_key=True),  # SHA-256 of the ek_ secret; never it
    Column("key_id", Integer, nullable=False),  # the key it was made from (its group, limits)
    Column("group_id", Integer, nullable=False),
    Column("model", String(200)),  # the public model it is bound to; NULL: any
    Column("session", Text),  # JSON: the session configuration it is bound to
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    ForeignKeyConstraint(["key_id"], ["api_keys.id"], name="fk_realtime_client_secrets_key_id"),
    Index("ix_realtime_client_secrets_expires_at", "expires_at"),
)
