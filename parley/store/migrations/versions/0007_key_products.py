"""Keys as products: a key's own model list and budget, the secret a rotation replaced
(accepted until its grace period ends), the idempotency key that created it (so a form
sent twice makes one key), and daily usage rollups per key, filled from the raw usage
records still kept.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TOTALS = (
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "characters",
    "audio_ms",
    "cost_nanos",
    "cached_tokens",
    "cache_write_tokens",
)


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("models", sa.Text))
        batch.add_column(sa.Column("budget_nanos", sa.BigInteger))
        batch.add_column(sa.Column("previous_digest", sa.String(64)))
        batch.add_column(sa.Column("previous_until", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("idempotency_key", sa.String(64)))
    op.create_index("ix_api_keys_previous_digest", "api_keys", ["previous_digest"])
    op.create_index("uq_api_keys_idempotency_key", "api_keys", ["idempotency_key"], unique=True)
    op.create_table(
        "usage_daily_keys",
        sa.Column("key_id", sa.Integer, primary_key=True),
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("model", sa.String(200), primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        *(sa.Column(name, sa.BigInteger, nullable=False, server_default="0") for name in TOTALS),
    )
    _fill_from_raw_records()


def _fill_from_raw_records() -> None:
    """Sum the admitted calls' raw records per key, UTC day and model."""
    if op.get_context().dialect.name == "postgresql":
        day = "CAST(timezone('UTC', created_at) AS DATE)"
    else:
        day = "date(created_at)"
    sums = ", ".join(f"SUM({name})" for name in TOTALS if name != "requests")
    op.execute(
        f"INSERT INTO usage_daily_keys (key_id, day, model, group_id, {', '.join(TOTALS)}) "
        f"SELECT key_id, {day}, model, MIN(group_id), COUNT(*), {sums} "
        f"FROM usage_records WHERE admitted GROUP BY key_id, {day}, model"
    )


def downgrade() -> None:
    op.drop_table("usage_daily_keys")
    op.drop_index("uq_api_keys_idempotency_key", "api_keys")
    op.drop_index("ix_api_keys_previous_digest", "api_keys")
    with op.batch_alter_table("api_keys") as batch:
        for name in (
            "idempotency_key",
            "previous_until",
            "previous_digest",
            "budget_nanos",
            "models",
        ):
            batch.drop_column(name)
