"""Stored responses of the Responses API: the response object, its input items and the
earlier turns' items, private to a group, pruned at ``expires_at``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "stored_responses",
        sa.Column("id", sa.String(100), primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("response", sa.Text, nullable=False),
        sa.Column("input_items", sa.Text, nullable=False),
        sa.Column("history", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_stored_responses_group_id"),
    )
    op.create_index("ix_stored_responses_expires_at", "stored_responses", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_stored_responses_expires_at", "stored_responses")
    op.drop_table("stored_responses")
