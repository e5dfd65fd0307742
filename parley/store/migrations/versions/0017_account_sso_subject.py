"""The single sign-on identity an administrator account is bound to: the provider's
issuer and the ``sub`` of its ID tokens, so a sign-in finds its account by who the
provider says it is, never by a name another could take.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("admin_accounts") as batch:
        batch.add_column(sa.Column("sso_subject", sa.String(600)))
        batch.create_unique_constraint("uq_admin_accounts_sso_subject", ["sso_subject"])


def downgrade() -> None:
    with op.batch_alter_table("admin_accounts") as batch:
        batch.drop_constraint("uq_admin_accounts_sso_subject", type_="unique")
        batch.drop_column("sso_subject")
