"""Alembic's environment for Parley's store.

``SqlStore.migrate`` runs Alembic on a connection of its own database and hands it
over in ``config.attributes["connection"]``. Without one (Alembic's own command line),
the ``sqlalchemy.url`` option is used: offline it renders SQL, online it connects with a
synchronous driver.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from parley.store.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata)
    with context.begin_transaction():
        context.run_migrations()


def _run_offline(url: str) -> None:
    context.configure(
        url=url,
        target_metadata=metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_online(url: str) -> None:
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


def main() -> None:
    given = context.config.attributes.get("connection")
    if isinstance(given, Connection):
        _run(given)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if url is None:
        raise RuntimeError("set sqlalchemy.url, or run migrations through SqlStore.migrate")
    if context.is_offline_mode():
        _run_offline(url)
    else:
        _run_online(url)


main()
