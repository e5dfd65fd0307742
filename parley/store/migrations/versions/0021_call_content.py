"""Content logging a group chooses: its policy and retention on ``groups``, and each
kept call's content in ``call_contents`` (sealed unless it is metadata only).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("groups") as batch:
        batch.add_column(
            sa.Column("content_policy", sa.String(20), nullable=False, server_default="off")
        )
        batch.add_column(
            sa.Column("content_retention_days", sa.Integer, nullable=False, server_default="30")
        )
    when = sa.DateTime(timezone=True)
    op.create_table(
        "call_contents",
        sa.Column("request_id", sa.String(200), primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("policy", sa.String(20), nullable=False),
        sa.Column("sealed", sa.Boolean, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("created_at", when, nullable=False),
        sa.Column("expires_at", when, nullable=False),
    )
    op.create_index("ix_call_contents_expires_at", "call_contents", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_call_contents_expires_at", "call_contents")
    op.drop_table("call_contents")
    with op.batch_alter_table("groups") as batch:
        batch.drop_column("content_retention_days")
        batch.drop_column("content_policy")
