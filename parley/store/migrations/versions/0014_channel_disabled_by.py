"""Who disabled a stored channel: an administrator, or the scheduled health checks
(``health-check``), which enable again only the channels they disabled.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("channels") as batch:
        batch.add_column(sa.Column("disabled_by", sa.String(200)))


def downgrade() -> None:
    with op.batch_alter_table("channels") as batch:
        batch.drop_column("disabled_by")
