"""Search units on usage records: what a rerank call is billed by, where its model is
priced per search unit (one query over up to 100 documents).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("usage_records") as batch:
        batch.add_column(
            sa.Column("search_units", sa.BigInteger, nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("usage_records") as batch:
        batch.drop_column("search_units")
