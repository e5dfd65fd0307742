"""Stored responses refer to the turn they continue instead of copying its history, and
a deleted one that a later turn continues is kept hidden until that turn goes.

A response stored from now on keeps only its own input and output and names the
response it continues (``previous_response_id``); its earlier turns are read by following
those names. The rows stored before keep their copy in ``history`` and name nothing, so
they are read as they are. ``deleted_at`` marks a response its group deleted while a
later turn still continues it: hidden from every read by id, kept for that turn's
history, and pruned with it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("stored_responses") as batch:
        batch.add_column(sa.Column("previous_response_id", sa.String(100)))
        batch.add_column(sa.Column("deleted_at", sa.DateTime(timezone=True)))
    op.create_index(
        "ix_stored_responses_previous_response_id", "stored_responses", ["previous_response_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_stored_responses_previous_response_id", "stored_responses")
    with op.batch_alter_table("stored_responses") as batch:
        batch.drop_column("deleted_at")
        batch.drop_column("previous_response_id")
