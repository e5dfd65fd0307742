"""Models managed live (their prices, and a price change scheduled for an instant), and
the unit prices each call was billed at, on its usage record.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("prices", sa.Text, nullable=False),
        _timestamp("prices_from"),
        sa.Column("next_prices", sa.Text),
        _timestamp("next_prices_from", nullable=True),
        sa.Column("enabled", sa.Boolean, nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.UniqueConstraint("name", name="uq_models_name"),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("usage_records") as batch:
        batch.add_column(sa.Column("price", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("usage_records") as batch:
        batch.drop_column("price")
    op.drop_table("models")
