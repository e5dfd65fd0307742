"""Batches (``batches``) and their lines (``batch_lines``): each line's state is written
before it is sent, so a restart never sends a line twice.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    when = sa.DateTime(timezone=True)
    op.create_table(
        "batches",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("key_id", sa.Integer, nullable=False),
        sa.Column("endpoint", sa.String(40), nullable=False),
        sa.Column("input_file_id", sa.String(40), nullable=False),
        sa.Column("completion_window", sa.String(10), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("metadata", sa.Text),
        sa.Column("errors", sa.Text),
        sa.Column("output_file_id", sa.String(40)),
        sa.Column("error_file_id", sa.String(40)),
        sa.Column("total", sa.Integer, nullable=False),
        sa.Column("completed", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("created_at", when, nullable=False),
        sa.Column("expires_at", when, nullable=False),
        sa.Column("in_progress_at", when),
        sa.Column("finalizing_at", when),
        sa.Column("completed_at", when),
        sa.Column("failed_at", when),
        sa.Column("expired_at", when),
        sa.Column("cancelling_at", when),
        sa.Column("cancelled_at", when),
        sa.ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_batches_group_id"),
    )
    op.create_index("ix_batches_group_id_id", "batches", ["group_id", "id"])
    op.create_index("ix_batches_status", "batches", ["status"])
    op.create_table(
        "batch_lines",
        sa.Column("batch_id", sa.String(40), primary_key=True),
        sa.Column("line", sa.Integer, primary_key=True),
        sa.Column("custom_id", sa.String(200), nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("result", sa.Text),
    )
    op.create_index("ix_batch_lines_state", "batch_lines", ["batch_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_batch_lines_state", "batch_lines")
    op.drop_table("batch_lines")
    op.drop_index("ix_batches_status", "batches")
    op.drop_index("ix_batches_group_id_id", "batches")
    op.drop_table("batches")
