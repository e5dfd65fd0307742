"""Realtime client secrets: the digest of each short-lived ``ek_`` secret a browser opens
a realtime session with, the key it was made from, what it is bound to, and its expiry.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "realtime_client_secrets",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("key_id", sa.Integer, nullable=False),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("session", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"], ["api_keys.id"], name="fk_realtime_client_secrets_key_id"
        ),
    )
    op.create_index(
        "ix_realtime_client_secrets_expires_at", "realtime_client_secrets", ["expires_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_realtime_client_secrets_expires_at", "realtime_client_secrets")
    op.drop_table("realtime_client_secrets")
