"""Groups, API keys, raw usage records and the daily usage rollups.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _create_groups() -> None:
    op.create_table(
        "groups",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("rpm", sa.Integer),
        sa.Column("tpm", sa.Integer),
        sa.Column("models", sa.Text),
        sa.Column("budget_nanos", sa.BigInteger),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.UniqueConstraint("name", name="uq_groups_name"),
        sqlite_autoincrement=True,
    )


def _create_api_keys() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(32), nullable=False),
        _timestamp("created_at"),
        _timestamp("expires_at", nullable=True),
        _timestamp("revoked_at", nullable=True),
        sa.Column("rpm", sa.Integer),
        sa.Column("tpm", sa.Integer),
        _timestamp("updated_at"),
        sa.ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_api_keys_group_id"),
        sa.UniqueConstraint("digest", name="uq_api_keys_digest"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_api_keys_updated_at", "api_keys", ["updated_at"])


def _create_usage_records() -> None:
    op.create_table(
        "usage_records",
        sa.Column("request_id", sa.String(200), primary_key=True),
        _timestamp("created_at"),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("key_id", sa.Integer, nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("channel", sa.String(200), nullable=False),
        sa.Column("endpoint", sa.String(200), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("latency_ms", sa.Integer, nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger, nullable=False),
        sa.Column("completion_tokens", sa.BigInteger, nullable=False),
        sa.Column("characters", sa.BigInteger, nullable=False),
        sa.Column("audio_ms", sa.BigInteger, nullable=False),
        sa.Column("cost_nanos", sa.BigInteger, nullable=False),
        sa.Column("estimated", sa.Boolean, nullable=False),
    )
    op.create_index("ix_usage_records_created_at", "usage_records", ["created_at"])
    op.create_index(
        "ix_usage_records_group_id_created_at", "usage_records", ["group_id", "created_at"]
    )


def _create_usage_daily() -> None:
    op.create_table(
        "usage_daily",
        sa.Column("group_id", sa.Integer, primary_key=True),
        sa.Column("day", sa.Date, primary_key=True),
        sa.Column("model", sa.String(200), primary_key=True),
        sa.Column("requests", sa.BigInteger, nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger, nullable=False),
        sa.Column("completion_tokens", sa.BigInteger, nullable=False),
        sa.Column("characters", sa.BigInteger, nullable=False),
        sa.Column("audio_ms", sa.BigInteger, nullable=False),
        sa.Column("cost_nanos", sa.BigInteger, nullable=False),
    )


def upgrade() -> None:
    _create_groups()
    _create_api_keys()
    _create_usage_records()
    _create_usage_daily()


def downgrade() -> None:
    op.drop_table("usage_daily")
    op.drop_table("usage_records")
    op.drop_table("api_keys")
    op.drop_table("groups")
