"""Clone deletions still to do on the engines: a clone deleted in Parley whose engine did
not delete it is kept here (attempts, the last error, the next attempt) until it does.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "voice_deletions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column("voice_id", sa.String(300), nullable=False),
        sa.Column("engine_name", sa.String(300), nullable=False),
        sa.Column("channel", sa.String(200), nullable=False),
        _timestamp("requested_at"),
        _timestamp("next_attempt_at"),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text),
        _timestamp("last_attempt_at", nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_voice_deletions_model_voice_id", "voice_deletions", ["model", "voice_id"])
    op.create_index("ix_voice_deletions_next_attempt_at", "voice_deletions", ["next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_voice_deletions_next_attempt_at", "voice_deletions")
    op.drop_index("ix_voice_deletions_model_voice_id", "voice_deletions")
    op.drop_table("voice_deletions")
