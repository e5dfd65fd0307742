"""Batch work shared by instances: each running lane holds a lease (``batch_lanes``),
each line taken or sent names its lane (``batch_lines.owner``), and a batch being ended
names the lane ending it (``batches.owner``). A lane whose lease ran out is dead: its
taken lines go back to the queue, its sent lines to the error file as ``interrupted``.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "batch_lanes",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("batch_lines") as batch:
        batch.add_column(sa.Column("owner", sa.String(40)))
    with op.batch_alter_table("batches") as batch:
        batch.add_column(sa.Column("owner", sa.String(40)))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.drop_column("owner")
    with op.batch_alter_table("batch_lines") as batch:
        batch.drop_column("owner")
    op.drop_table("batch_lanes")
