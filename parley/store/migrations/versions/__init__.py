"""Migration scripts, loaded by Alembic from this folder by path."""
