"""The request log: what a usage record adds for it (the model the caller asked for, the
error code, the time to the first byte) and refusals (``admitted`` false), with a partial
index on the failed calls' and refusals' status and time.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FAILED_ONLY = "status >= 400"
"""The partial index's condition, as ``store/schema.py`` names it."""


def upgrade() -> None:
    with op.batch_alter_table("usage_records") as batch:
        batch.add_column(
            sa.Column("model_requested", sa.String(200), nullable=False, server_default="")
        )
        batch.add_column(sa.Column("error_code", sa.String(100)))
        batch.add_column(sa.Column("first_byte_ms", sa.Integer))
        batch.add_column(
            sa.Column("admitted", sa.Boolean, nullable=False, server_default=sa.true())
        )
    op.create_index(
        "ix_usage_records_failed_status_created_at",
        "usage_records",
        ["status", "created_at"],
        sqlite_where=sa.text(FAILED_ONLY),
        postgresql_where=sa.text(FAILED_ONLY),
    )


def downgrade() -> None:
    op.drop_index("ix_usage_records_failed_status_created_at", "usage_records")
    with op.batch_alter_table("usage_records") as batch:
        for name in ("admitted", "first_byte_ms", "error_code", "model_requested"):
            batch.drop_column(name)
