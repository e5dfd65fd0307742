"""Cached input tokens on usage records and rollups: those read from an upstream's prompt
cache and those written to it, each priced on its own.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("usage_records", "usage_daily")
COLUMNS = ("cached_tokens", "cache_write_tokens")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            for column in COLUMNS:
                batch.add_column(
                    sa.Column(column, sa.BigInteger, nullable=False, server_default="0")
                )


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            for column in COLUMNS:
                batch.drop_column(column)
