"""Channels managed from the admin surface (credentials sealed), their health history,
and named administrator accounts with roles.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "channels",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("api_key_sealed", sa.Text),
        sa.Column("key_hint", sa.String(32)),
        _timestamp("disabled_at", nullable=True),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.UniqueConstraint("name", name="uq_channels_name"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "channel_events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("channel", sa.String(200), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("status", sa.Integer),
        sa.Column("latency_ms", sa.Integer),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        _timestamp("created_at"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_channel_events_channel_id", "channel_events", ["channel", "id"])
    op.create_table(
        "admin_accounts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("password_hash", sa.String(300), nullable=False),
        _timestamp("disabled_at", nullable=True),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.UniqueConstraint("name", name="uq_admin_accounts_name"),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("admin_accounts")
    op.drop_index("ix_channel_events_channel_id", "channel_events")
    op.drop_table("channel_events")
    op.drop_table("channels")
