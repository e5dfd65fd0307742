"""``SqlStore``: the ``Store`` Protocol on SQLite or PostgreSQL through SQLAlchemy Core.

``open_store`` takes the operator's URL (``sqlite:///./parley.db``, ``sqlite://`` for
memory, ``postgresql://user@host:5432/db`` or ``postgres://...``) and picks the async
driver (aiosqlite, asyncpg). Each method is one short transaction, run inside
``boundary.database_errors``: a taken unique name is ``Conflict``, and any failure of the
database itself (refused, dropped, timed out) is ``StoreUnavailable``. No exception of
SQLAlchemy or a driver leaves this class.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import RowMapping, func, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from parley.domain.audit import AuditEntry
from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord
from parley.domain.usage import DailyUsage, GroupDailyUsage, UsageRecord
from parley.domain.voices import Clone
from parley.store import admin_sql, usage_sql, usage_sqlite, voices_sql
from parley.store.base import Conflict, GroupChanges, Missing
from parley.store.boundary import database_errors
from parley.store.engine import (
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_PRAGMAS,
    create_store_engine,
    sqlite_file,
    upgrade_to_head,
)
from parley.store.schema import UtcDateTime, api_keys, groups

DEFAULT_TIMEOUT_SECONDS = 10.0
"""The longest a connect or a statement may take before the database counts as away."""
DEFAULT_QUOTA = Quota()
"""No rates of its own: unlimited for a group, inherit the group's for a key."""


class SqlStore:
    """The store on one async engine; build it with ``open_store``."""

    def __init__(
        self, engine: AsyncEngine, usage: usage_sqlite.SqliteUsageWriter | None = None
    ) -> None:
        self._engine = engine
        self._usage = usage
        """A SQLite file's own usage writer (``store/usage_sqlite.py``); None: SQLAlchemy's."""

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    async def migrate(self) -> None:
        with database_errors():
            await upgrade_to_head(self._engine)

    async def close(self) -> None:
        with database_errors():
            if self._usage is not None:
                await self._usage.close()
            await self._engine.dispose()

    @asynccontextmanager
    async def _begin(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a transaction, committed at the end; errors mapped."""
        with database_errors():
            async with self._engine.begin() as conn:
                yield conn

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reading; errors mapped."""
        with database_errors():
            async with self._engine.connect() as conn:
                yield conn

    # groups

    async def create_group(
        self,
        name: str,
        *,
        quota: Quota = DEFAULT_QUOTA,
        models: frozenset[str] | None = None,
        budget_nanos: int | None = None,
    ) -> Group:
        now = _now()
        values = {
            "name": name,
            "rpm": quota.rpm,
            "tpm": quota.tpm,
            "models": _models_json(models),
            "budget_nanos": budget_nanos,
            "created_at": now,
            "updated_at": now,
        }
        try:
            async with self._begin() as conn:
                result = await conn.execute(groups.insert().values(values).returning(*groups.c))
                row = result.mappings().one()
        except Conflict as error:
            raise Conflict(f"a group named `{name}` already exists") from error
        return _group(row)

    async def update_group(self, name: str, changes: GroupChanges) -> Group:
        values = _group_changes(changes) | {"updated_at": _now()}
        statement = groups.update().where(groups.c.name == name).values(values).returning(*groups.c)
        async with self._begin() as conn:
            row = (await conn.execute(statement)).mappings().one_or_none()
        if row is None:
            raise Missing(f"there is no group named `{name}`")
        return _group(row)

    async def get_group(self, name: str) -> Group | None:
        async with self._connect() as conn:
            result = await conn.execute(select(groups).where(groups.c.name == name))
            row = result.mappings().one_or_none()
        return None if row is None else _group(row)

    async def list_groups(self) -> list[Group]:
        async with self._connect() as conn:
            result = await conn.execute(select(groups).order_by(groups.c.id))
            return [_group(row) for row in result.mappings()]

    # keys

    async def create_key(
        self,
        group_id: int,
        *,
        name: str,
        digest: str,
        prefix: str,
        expires_at: datetime | None = None,
        quota: Quota = DEFAULT_QUOTA,
    ) -> KeyRecord:
        now = _now()
        values = {
            "group_id": group_id,
            "name": name,
            "digest": digest,
            "prefix": prefix,
            "created_at": now,
            "expires_at": expires_at,
            "rpm": quota.rpm,
            "tpm": quota.tpm,
            "updated_at": now,
        }
        try:
            async with self._begin() as conn:
                found = await conn.execute(select(groups.c.id).where(groups.c.id == group_id))
                if found.first() is None:
                    raise Missing(f"there is no group with id {group_id}")
                result = await conn.execute(api_keys.insert().values(values).returning(*api_keys.c))
                row = result.mappings().one()
        except Conflict as error:
            raise Conflict("a key with this digest already exists") from error
        return _key(row)

    async def find_key(self, digest: str) -> KeyRecord | None:
        async with self._connect() as conn:
            result = await conn.execute(select(api_keys).where(api_keys.c.digest == digest))
            row = result.mappings().one_or_none()
        return None if row is None else _key(row)

    async def list_keys(self, group_id: int | None = None) -> list[KeyRecord]:
        query = select(api_keys).order_by(api_keys.c.id)
        if group_id is not None:
            query = query.where(api_keys.c.group_id == group_id)
        async with self._connect() as conn:
            return [_key(row) for row in (await conn.execute(query)).mappings()]

    async def revoke_key(self, key_id: int, at: datetime) -> KeyRecord:
        first_time = func.coalesce(api_keys.c.revoked_at, literal(at, UtcDateTime))
        statement = (
            api_keys.update()
            .where(api_keys.c.id == key_id)
            .values(revoked_at=first_time, updated_at=_now())
            .returning(*api_keys.c)
        )
        async with self._begin() as conn:
            row = (await conn.execute(statement)).mappings().one_or_none()
        if row is None:
            raise Missing(f"there is no key with id {key_id}")
        return _key(row)

    async def keys_changed_since(self, since: datetime) -> list[KeyRecord]:
        query = select(api_keys).where(api_keys.c.updated_at >= since).order_by(api_keys.c.id)
        async with self._connect() as conn:
            return [_key(row) for row in (await conn.execute(query)).mappings()]

    # usage

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        if self._usage is not None:
            with database_errors():
                return await self._usage.record_usage(records)
        async with self._begin() as conn:
            return await usage_sql.record_usage(conn, records)

    async def daily_usage(self, group_id: int, start: date, end: date) -> list[DailyUsage]:
        async with self._connect() as conn:
            return await usage_sql.daily_usage(conn, group_id, start, end)

    async def spend_since(self, day: date) -> dict[int, int]:
        async with self._connect() as conn:
            return await usage_sql.spend_since(conn, day)

    async def count_usage(self, group_id: int | None = None) -> int:
        async with self._connect() as conn:
            return await usage_sql.count_usage(conn, group_id)

    async def prune_usage(self, before: datetime) -> int:
        async with self._begin() as conn:
            return await usage_sql.prune_usage(conn, before)

    # voice clones

    async def add_clone(self, clone: Clone) -> Clone:
        async with self._begin() as conn:
            return await voices_sql.add_clone(conn, clone)

    async def list_clones(
        self, *, model: str | None = None, group_id: int | None = None
    ) -> list[Clone]:
        async with self._connect() as conn:
            return await voices_sql.list_clones(conn, model, group_id)

    async def delete_clone(self, model: str, voice_id: str) -> bool:
        async with self._begin() as conn:
            return await voices_sql.delete_clone(conn, model, voice_id)

    # the admin surface (parley/store/admin_sql.py)

    async def set_group_disabled(self, name: str, at: datetime | None) -> Group:
        async with self._begin() as conn:
            row = await admin_sql.set_group_disabled(conn, name, at, _now())
        if row is None:
            raise Missing(f"there is no group named `{name}`")
        return _group(row)

    async def usage_rollups(
        self, start: date, end: date, *, group_id: int | None = None, model: str | None = None
    ) -> list[GroupDailyUsage]:
        async with self._connect() as conn:
            return await admin_sql.usage_rollups(conn, start, end, group_id=group_id, model=model)

    async def errors_by_day(self, since: datetime) -> dict[date, int]:
        async with self._connect() as conn:
            return await admin_sql.errors_by_day(conn, since)

    async def keys_last_used(self, group_id: int | None = None) -> dict[int, datetime]:
        async with self._connect() as conn:
            return await admin_sql.keys_last_used(conn, group_id)

    async def record_audit(self, entry: AuditEntry) -> AuditEntry:
        async with self._begin() as conn:
            return await admin_sql.record_audit(conn, entry)

    async def list_audit(
        self, *, limit: int = 100, before_id: int | None = None
    ) -> list[AuditEntry]:
        async with self._connect() as conn:
            return await admin_sql.list_audit(conn, limit=limit, before_id=before_id)


async def open_store(
    url: str,
    *,
    pool_size: int = 5,
    schema: str | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> SqlStore:
    """A store on the database at ``url`` (not migrated yet: call ``migrate``).

    ``pool_size`` bounds the connections kept open (SQLite files and PostgreSQL).
    ``schema`` (PostgreSQL only) keeps every table, the Alembic version table included,
    in that existing schema: it becomes the connections' ``search_path``. It lets several
    installations, or parallel test runs, share one database. ``timeout_seconds`` bounds a
    connect, a statement (PostgreSQL) and the wait for a pooled connection.
    """
    engine = create_store_engine(url, pool_size=pool_size, schema=schema, timeout=timeout_seconds)
    path = sqlite_file(url)
    if path is None or not usage_sqlite.supported():
        return SqlStore(engine)
    timeout = SQLITE_BUSY_TIMEOUT_MS / 1000
    return SqlStore(engine, usage_sqlite.SqliteUsageWriter(path, SQLITE_PRAGMAS, timeout))


def _now() -> datetime:
    return datetime.now(UTC)


def _models_json(models: frozenset[str] | None) -> str | None:
    return None if models is None else json.dumps(sorted(models))


def _group_changes(changes: GroupChanges) -> dict[str, Any]:
    """Column values for the fields that change; a clear flag wins over a new value."""
    values: dict[str, Any] = {}
    for column, value, clear in (
        ("rpm", changes.rpm, changes.clear_rpm),
        ("tpm", changes.tpm, changes.clear_tpm),
        ("budget_nanos", changes.budget_nanos, changes.clear_budget),
        ("models", _models_json(changes.models), changes.clear_models),
    ):
        if clear:
            values[column] = None
        elif value is not None:
            values[column] = value
    return values


def _group(row: RowMapping) -> Group:
    models = row["models"]
    return Group(
        id=row["id"],
        name=row["name"],
        quota=Quota(rpm=row["rpm"], tpm=row["tpm"]),
        models=None if models is None else frozenset(json.loads(models)),
        budget_nanos=row["budget_nanos"],
        created_at=row["created_at"],
        disabled_at=row["disabled_at"],
    )


def _key(row: RowMapping) -> KeyRecord:
    return KeyRecord(
        id=row["id"],
        group_id=row["group_id"],
        name=row["name"],
        digest=row["digest"],
        prefix=row["prefix"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        quota=Quota(rpm=row["rpm"], tpm=row["tpm"]),
    )
