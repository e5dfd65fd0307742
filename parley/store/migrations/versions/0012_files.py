"""Uploaded files: their metadata (``files``), private to a group, and their bytes in
chunks (``file_chunks``) where the database keeps them (PostgreSQL; a SQLite deployment
keeps them in a folder beside its file and leaves the table empty).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("group_id", sa.Integer, nullable=False),
        sa.Column("filename", sa.String(255), nullable=False),
        sa.Column("purpose", sa.String(40), nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
        sa.ForeignKeyConstraint(["group_id"], ["groups.id"], name="fk_files_group_id"),
    )
    op.create_index("ix_files_group_id_id", "files", ["group_id", "id"])
    op.create_index("ix_files_expires_at", "files", ["expires_at"])
    op.create_table(
        "file_chunks",
        sa.Column("file_id", sa.String(40), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("file_chunks")
    op.drop_index("ix_files_expires_at", "files")
    op.drop_index("ix_files_group_id_id", "files")
    op.drop_table("files")
