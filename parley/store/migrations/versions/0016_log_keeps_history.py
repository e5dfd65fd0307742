"""The request log keeps its history: each line the prefix of the secret that made it
and why a failed call failed; each key the prefixes of the secrets rotations replaced.

Lines written before this revision have no prefix of their own: the log shows the key's
prefix for them only when the key was never rotated (``store/requests_sql.py``).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("usage_records") as batch:
        batch.add_column(sa.Column("key_prefix", sa.String(32)))
        batch.add_column(sa.Column("error_detail", sa.String(600)))
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("former_prefixes", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("former_prefixes")
    with op.batch_alter_table("usage_records") as batch:
        batch.drop_column("error_detail")
        batch.drop_column("key_prefix")
