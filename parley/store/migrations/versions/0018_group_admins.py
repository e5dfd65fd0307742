"""A group's own administrators: an account of the ``group-admin`` role names the one
group it administers (``admin_accounts.group_id``; NULL for every other role).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("admin_accounts") as batch:
        batch.add_column(sa.Column("group_id", sa.Integer))
        batch.create_foreign_key("fk_admin_accounts_group_id", "groups", ["group_id"], ["id"])


def downgrade() -> None:
    with op.batch_alter_table("admin_accounts") as batch:
        batch.drop_constraint("fk_admin_accounts_group_id", type_="foreignkey")
        batch.drop_column("group_id")
