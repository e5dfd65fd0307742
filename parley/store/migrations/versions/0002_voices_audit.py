"""Voice clones (the registry that keeps clones private to their group), the admin audit
log, group enable/disable and a key's last use.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "voice_clones",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column("voice_id", sa.String(300), nullable=False),
        sa.Column("engine_name", sa.String(300), nullable=False),
        sa.Column("channel", sa.String(200), nullable=False),
        sa.Column("transcript", sa.Text),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        _timestamp("created_at"),
        sa.ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_voice_clones_group_id"),
        sa.UniqueConstraint("model", "voice_id", name="uq_voice_clones_model_voice_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_voice_clones_group_id", "voice_clones", ["group_id"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True),
        _timestamp("created_at"),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("address", sa.String(200), nullable=False),
        sa.Column("action", sa.String(200), nullable=False),
        sa.Column("target", sa.String(300), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_log_created_at", "audit_log", ["created_at"])
    with op.batch_alter_table("groups") as batch:
        batch.add_column(sa.Column("disabled_at", sa.DateTime(timezone=True)))
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("last_used_at")
    with op.batch_alter_table("groups") as batch:
        batch.drop_column("disabled_at")
    op.drop_index("ix_audit_log_created_at", "audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_voice_clones_group_id", "voice_clones")
    op.drop_table("voice_clones")
