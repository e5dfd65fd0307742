"""Realtime client secrets (``realtime_client_secrets``), as queries on one connection:
kept by digest, found by digest, pruned once expired."""

from __future__ import annotations

from datetime import datetime

import orjson
from sqlalchemy import Connection, RowMapping, delete, select

from parley.domain.client_secrets import ClientSecret
from parley.store.rows import columns, record
from parley.store.schema import realtime_client_secrets as table


def add_client_secret(conn: Connection, secret: ClientSecret) -> None:
    session = None if secret.session is None else orjson.dumps(secret.session).decode()
    conn.execute(table.insert().values(columns(secret, session=session)))


def find_client_secret(conn: Connection, digest: str) -> ClientSecret | None:
    row = conn.execute(select(table).where(table.c.digest == digest)).mappings().first()
    return None if row is None else _secret(row)


def prune_client_secrets(conn: Connection, before: datetime) -> int:
    """Forget the secrets that expired before ``before``; how many there were."""
    return int(conn.execute(delete(table).where(table.c.expires_at < before)).rowcount)


def _secret(row: RowMapping) -> ClientSecret:
    session = row["session"]
    return record(ClientSecret, row, session=None if session is None else orjson.loads(session))
