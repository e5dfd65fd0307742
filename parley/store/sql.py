"""``SqlStore``: the ``Store`` Protocol on SQLite or PostgreSQL through SQLAlchemy Core.

``open_store`` (``opening.py``, also named here) takes the operator's URL
(``sqlite:///./parley.db``, ``sqlite://`` for memory, ``postgresql://user@host:5432/db``
or ``postgres://...``); on a SQLite file it opens ``SqliteServingStore``
(``sqlite_serving.py``), which serves with plain ``sqlite3`` and opens this class on
the same file for everything else. ``open_sql_store`` opens this class on its
``Database`` (``database.py``: SQLite on threads of its own, PostgreSQL on asyncpg). The
queries are synchronous functions on a Core ``Connection`` (``keys_sql.py``,
``usage_sql.py``, ``admin_sql.py``, ``voices_sql.py``); each method runs one as one short
unit of work, inside ``boundary.database_errors``: a taken unique name is ``Conflict``,
any failure of the database itself (refused, dropped, timed out) is
``StoreUnavailable``, and a query the database refused (a missing column, another
constraint) is ``StoreFault``. No exception of SQLAlchemy or a driver leaves this class.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Concatenate

from parley.domain.accounts import Account
from parley.domain.audit import AuditEntry, AuditQuery
from parley.domain.batches import Batch, BatchLine, BatchPage
from parley.domain.channels import ChannelEvent, StoredChannel
from parley.domain.content import NO_CONTENT_LOGGING, ContentLogging, StoredContent
from parley.domain.files import FilePage, StoredFile
from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord
from parley.domain.responses import StoredResponse
from parley.domain.stored_models import StoredModel
from parley.domain.usage import UsageRecord
from parley.domain.voices import Clone, PendingDeletion
from parley.store import (
    admin_sql,
    batches_sql,
    channels_sql,
    client_secrets_sql,
    contents_sql,
    files_sql,
    keys_sql,
    models_sql,
    requests_sql,
    responses_sql,
    usage_sql,
    usage_sqlite,
    voices_sql,
)
from parley.store.base import Conflict, GroupChanges, KeyChanges, Missing, Replay
from parley.store.boundary import database_errors
from parley.store.database import Database, P, T, Work
from parley.store.engine import (
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_PRAGMAS,
    asyncpg_connect_args,
    open_database,
    sqlite_file,
    upgrade_to_head,
)
from parley.store.migrate_apart import Target, shareable, upgrade_apart
from parley.store.opening import DEFAULT_TIMEOUT_SECONDS, open_store
from parley.store.usage_host import HostUsageClient

if TYPE_CHECKING:
    from parley.store.usage_postgres import PostgresUsageWriter

__all__ = ["DEFAULT_QUOTA", "DEFAULT_TIMEOUT_SECONDS", "SqlStore", "open_sql_store", "open_store"]

DEFAULT_QUOTA = Quota()
"""No rates of its own: unlimited for a group, inherit the group's for a key."""


def reading(work: Work[P, T]) -> Callable[Concatenate[SqlStore, P], Coroutine[Any, Any, T]]:
    """A ``SqlStore`` method that runs the query ``work`` on a connection for reading: its
    signature is the query's without the connection, so it is written once, there."""

    async def method(self: SqlStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._read(work, *args, **kwargs)

    method.__name__, method.__doc__ = work.__name__, work.__doc__
    return method


def writing(work: Work[P, T]) -> Callable[Concatenate[SqlStore, P], Coroutine[Any, Any, T]]:
    """A ``SqlStore`` method that runs the query ``work`` in one transaction, as
    ``reading`` does for a read."""

    async def method(self: SqlStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._write(work, *args, **kwargs)

    method.__name__, method.__doc__ = work.__name__, work.__doc__
    return method


class SqlStore:
    """The store on one ``Database``; build it with ``open_store``."""

    def __init__(
        self,
        database: Database,
        usage: usage_sqlite.SqliteUsageWriter | HostUsageClient | PostgresUsageWriter | None = None,
        *,
        shared: Target | None = None,
    ) -> None:
        self._database = database
        self._usage = usage
        """A SQLite file's own usage writer (``store/usage_sqlite.py``), the host's
        (``store/usage_host.py``) or PostgreSQL's (``store/usage_postgres.py``); None:
        SQLAlchemy's."""
        self._shared = shared
        """How another process opens this database; None for a memory database."""

    @property
    def database(self) -> Database:
        return self._database

    async def migrate(self, *, apart: bool = False) -> None:
        """Bring the schema to the newest migration. ``apart``: a database behind it that
        another process can open is upgraded by a short-lived child process, so this one
        (a server's) never loads Alembic (``store/migrate_apart.py``); a memory database
        is always upgraded here."""
        with database_errors():
            if apart and self._shared is not None:
                await upgrade_apart(self._database, self._shared)
            else:
                await upgrade_to_head(self._database)

    async def close(self) -> None:
        with database_errors():
            if self._usage is not None:
                await self._usage.close()
            await self._database.close()

    async def _write(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``work`` in one transaction, committed at its end; errors mapped."""
        with database_errors():
            return await self._database.transaction(work, *args, **kwargs)

    async def _read(self, work: Work[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``work`` on a connection for reading; errors mapped."""
        with database_errors():
            return await self._database.read(work, *args, **kwargs)

    # groups

    async def create_group(
        self,
        name: str,
        *,
        quota: Quota = DEFAULT_QUOTA,
        models: frozenset[str] | None = None,
        budget_nanos: int | None = None,
        content: ContentLogging = NO_CONTENT_LOGGING,
    ) -> Group:
        try:
            return await self._write(
                keys_sql.create_group,
                name,
                quota=quota,
                models=models,
                budget_nanos=budget_nanos,
                now=_now(),
                content=content,
            )
        except Conflict as error:
            raise Conflict(f"a group named `{name}` already exists") from error

    async def update_group(self, name: str, changes: GroupChanges) -> Group:
        return await self._write(keys_sql.update_group, name, changes, _now())

    get_group = reading(keys_sql.get_group)
    list_groups = reading(keys_sql.list_groups)

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
        models: frozenset[str] | None = None,
        budget_nanos: int | None = None,
        idempotency_key: str | None = None,
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
            "models": keys_sql.models_json(models),
            "budget_nanos": budget_nanos,
            "idempotency_key": idempotency_key,
            "updated_at": now,
        }
        try:
            return await self._write(keys_sql.create_key, values)
        except Conflict as error:
            if idempotency_key is not None:  # a concurrent twin won the race
                earlier = await self._read(keys_sql.created_with, idempotency_key)
                if earlier is not None:
                    raise Replay(earlier) from error
            raise Conflict("a key with this digest already exists") from error

    find_key = reading(keys_sql.find_key)
    list_keys = reading(keys_sql.list_keys)

    async def revoke_key(self, key_id: int, at: datetime) -> KeyRecord:
        return await self._write(keys_sql.revoke_key, key_id, at, _now())

    keys_changed_since = reading(keys_sql.keys_changed_since)

    async def update_key(self, key_id: int, changes: KeyChanges) -> KeyRecord:
        return await self._write(keys_sql.update_key, key_id, changes, _now())

    async def rotate_key(
        self, key_id: int, *, digest: str, prefix: str, previous_until: datetime
    ) -> KeyRecord:
        return await self._write(
            keys_sql.rotate_key,
            key_id,
            digest=digest,
            prefix=prefix,
            until=previous_until,
            now=_now(),
        )

    # usage

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        if self._usage is not None:
            with database_errors():
                return await self._usage.record_usage(records)
        return await self._write(usage_sql.record_usage, records)

    daily_usage = reading(usage_sql.daily_usage)
    spend_since = reading(usage_sql.spend_since)
    key_spend_since = reading(usage_sql.key_spend_since)
    count_usage = reading(usage_sql.count_usage)
    prune_usage = writing(usage_sql.prune_usage)

    # voice clones
    add_clone = writing(voices_sql.add_clone)

    async def list_clones(
        self, *, model: str | None = None, group_id: int | None = None
    ) -> list[Clone]:
        return await self._read(voices_sql.list_clones, model, group_id)

    delete_clone = writing(voices_sql.delete_clone)
    retire_clone = writing(voices_sql.retire_clone)

    async def list_deletions(
        self, *, model: str | None = None, group_id: int | None = None
    ) -> list[PendingDeletion]:
        return await self._read(voices_sql.list_deletions, model, group_id)

    find_deletion = reading(voices_sql.find_deletion)
    claim_deletion = writing(voices_sql.claim_deletion)
    deletion_failed = writing(voices_sql.deletion_failed)
    finish_deletion = writing(voices_sql.finish_deletion)

    # realtime client secrets
    add_client_secret = writing(client_secrets_sql.add_client_secret)
    find_client_secret = reading(client_secrets_sql.find_client_secret)
    prune_client_secrets = writing(client_secrets_sql.prune_client_secrets)

    # calls' kept content (parley/store/contents_sql.py)

    save_contents = writing(contents_sql.save_contents)

    async def find_content(self, request_id: str) -> StoredContent | None:
        return await self._read(contents_sql.find_content, request_id, _now())

    async def purge_contents(self, most: int = 1000) -> int:
        return await self._write(contents_sql.purge_contents, _now(), most)

    # stored responses (parley/store/responses_sql.py)

    async def save_responses(self, responses: Sequence[StoredResponse]) -> int:
        return await self._write(responses_sql.save_responses, responses)

    async def find_response(self, response_id: str, group_id: int) -> StoredResponse | None:
        return await self._read(responses_sql.find_response, response_id, group_id, _now())

    async def find_turns(self, response_id: str, group_id: int, most: int) -> list[StoredResponse]:
        return await self._read(responses_sql.find_turns, response_id, group_id, _now(), most)

    async def delete_response(self, response_id: str, group_id: int) -> bool:
        return await self._write(responses_sql.delete_response, response_id, group_id, _now())

    async def prune_responses(self) -> int:
        return await self._write(responses_sql.prune_responses, _now())

    # uploaded files (parley/store/files_sql.py)

    add_file = writing(files_sql.add_file)

    async def find_file(self, file_id: str, group_id: int) -> StoredFile | None:
        return await self._read(files_sql.find_file, file_id, group_id, _now())

    async def list_files(
        self,
        group_id: int,
        *,
        limit: int,
        after: str | None = None,
        ascending: bool = False,
        purpose: str | None = None,
    ) -> FilePage:
        return await self._read(
            files_sql.list_files,
            group_id,
            _now(),
            limit=limit,
            after=after,
            ascending=ascending,
            purpose=purpose,
        )

    async def every_file(self, group_id: int | None, *, limit: int) -> list[StoredFile]:
        return await self._read(files_sql.every_file, group_id, _now(), limit=limit)

    async def delete_file(self, file_id: str, group_id: int) -> bool:
        return await self._write(files_sql.delete_file, file_id, group_id, _now())

    async def group_file_bytes(self, group_id: int) -> int:
        return await self._read(files_sql.group_file_bytes, group_id, _now())

    async def expired_files(self, most: int) -> list[str]:
        return await self._read(files_sql.expired_files, _now(), most)

    forget_files = writing(files_sql.forget_files)
    add_file_chunk = writing(files_sql.add_file_chunk)
    file_chunk = reading(files_sql.file_chunk)
    delete_file_chunks = writing(files_sql.delete_file_chunks)

    # batches (parley/store/batches_sql.py)

    add_batch = writing(batches_sql.add_batch)
    add_batch_lines = writing(batches_sql.add_batch_lines)
    find_batch = reading(batches_sql.find_batch)

    async def list_batches(
        self,
        group_id: int,
        *,
        limit: int,
        after: str | None = None,
        before: str | None = None,
        messages: bool = False,
    ) -> BatchPage:
        return await self._read(
            batches_sql.list_batches,
            group_id,
            limit=limit,
            after=after,
            before=before,
            messages=messages,
        )

    async def every_batch(
        self, group_id: int | None, *, status: str | None = None, limit: int
    ) -> list[Batch]:
        return await self._read(batches_sql.every_batch, group_id, status=status, limit=limit)

    async def set_batch_status(
        self, batch_id: str, status: str, *, only_from: Sequence[str], **columns: Any
    ) -> bool:
        return await self._write(
            batches_sql.set_status, batch_id, status, _now(), only_from=only_from, **columns
        )

    async def runnable_batches(self) -> list[Batch]:
        return await self._read(batches_sql.runnable_batches)

    delete_batch = writing(batches_sql.delete_batch)
    batch_lines = reading(batches_sql.lines_in_state)
    claim_batch_lines = writing(batches_sql.claim_lines)

    async def mark_line_sent(self, batch_id: str, line: int, lane: str) -> bool:
        return await self._write(batches_sql.mark_sent, batch_id, line, lane, _now())

    release_batch_lines = writing(batches_sql.release)
    finish_batch_lines = writing(batches_sql.finish_lines)
    batch_results = reading(batches_sql.results)
    all_batch_results = reading(batches_sql.all_results)
    batch_line_counts = reading(batches_sql.line_counts)
    batch_line_counts_of = reading(batches_sql.counts_of)

    async def orphan_batch_lines(
        self, batch_id: str, state: str, lane: str, *, most: int
    ) -> list[BatchLine]:
        return await self._read(batches_sql.orphans, batch_id, state, lane, _now(), most=most)

    async def requeue_orphan_lines(self, batch_id: str, lane: str) -> int:
        return await self._write(batches_sql.requeue_orphans, batch_id, lane, _now())

    async def take_batch(self, batch_id: str, lane: str) -> bool:
        return await self._write(batches_sql.take_batch, batch_id, lane, _now())

    async def beat_batch_lane(self, lane: str, seconds: float) -> None:
        now = _now()
        await self._write(batches_sql.beat_lane, lane, now + timedelta(seconds=seconds), now)

    drop_batch_lanes = writing(batches_sql.drop_lanes)

    # the admin surface (parley/store/admin_sql.py)

    async def set_group_disabled(self, name: str, at: datetime | None) -> Group:
        group = await self._write(admin_sql.set_group_disabled, name, at, _now())
        if group is None:
            raise Missing(f"there is no group named `{name}`")
        return group

    usage_rollups = reading(admin_sql.usage_rollups)
    key_usage_rollups = reading(admin_sql.key_usage_rollups)
    failures_by_day = reading(admin_sql.failures_by_day)
    list_requests = reading(requests_sql.list_requests)
    find_request = reading(requests_sql.find_request)
    prefix_cost = reading(requests_sql.prefix_cost)
    keys_last_used = reading(admin_sql.keys_last_used)
    record_audit = writing(admin_sql.record_audit)

    async def list_audit(
        self, *, limit: int = 100, before_id: int | None = None, query: AuditQuery | None = None
    ) -> list[AuditEntry]:
        return await self._read(admin_sql.list_audit, limit=limit, before_id=before_id, query=query)

    # channels managed live, their history, and administrator accounts (channels_sql.py)

    async def list_channels(self) -> list[StoredChannel]:
        return await self._read(channels_sql.list_channels)

    async def add_channel(self, channel: StoredChannel) -> StoredChannel:
        return await self._write(channels_sql.add_channel, channel)

    async def replace_channel(
        self, channel: StoredChannel, *, if_updated_at: datetime | None = None
    ) -> StoredChannel:
        return await self._write(channels_sql.replace_channel, channel, if_updated_at)

    async def delete_channel(self, name: str) -> bool:
        return await self._write(channels_sql.delete_channel, name)

    async def record_channel_events(self, events: Sequence[ChannelEvent]) -> None:
        await self._write(channels_sql.record_channel_events, list(events))

    async def channel_events(self, channel: str, limit: int = 100) -> list[ChannelEvent]:
        return await self._read(channels_sql.channel_events_of, channel, limit)

    async def prune_channel_events(self, before: datetime) -> int:
        return await self._write(channels_sql.prune_channel_events, before)

    # models managed live (models_sql.py)

    async def list_models(self) -> list[StoredModel]:
        return await self._read(models_sql.list_models)

    async def add_model(self, model: StoredModel) -> StoredModel:
        return await self._write(models_sql.add_model, model)

    async def replace_model(self, model: StoredModel) -> StoredModel:
        return await self._write(models_sql.replace_model, model)

    async def delete_model(self, name: str) -> bool:
        return await self._write(models_sql.delete_model, name)

    async def list_accounts(self) -> list[Account]:
        return await self._read(channels_sql.list_accounts)

    async def get_account(self, name: str) -> Account | None:
        return await self._read(channels_sql.get_account, name)

    async def account_of_subject(self, subject: str) -> Account | None:
        return await self._read(channels_sql.account_of_subject, subject)

    async def add_account(self, account: Account) -> Account:
        return await self._write(channels_sql.add_account, account)

    async def update_account(self, name: str, changes: dict[str, Any]) -> Account:
        return await self._write(channels_sql.update_account, name, changes, _now())

    async def delete_account(self, name: str) -> bool:
        return await self._write(channels_sql.delete_account, name)


async def open_sql_store(
    url: str,
    *,
    pool_size: int = 5,
    schema: str | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    usage_socket: str | None = None,
) -> SqlStore:
    """A ``SqlStore`` on the database at ``url``, whatever it is (``opening.open_store``
    says what each argument is; it opens a SQLite file's store without SQLAlchemy)."""
    database = open_database(url, pool_size=pool_size, schema=schema, timeout=timeout_seconds)
    shared = Target(url, schema, timeout_seconds) if shareable(url) else None
    if database.dialect == "postgresql":
        from parley.store.usage_postgres import PostgresUsageWriter  # asyncpg: PostgreSQL only

        connect = asyncpg_connect_args(url, schema=schema, timeout=timeout_seconds)
        return SqlStore(database, PostgresUsageWriter(connect, timeout_seconds), shared=shared)
    path = sqlite_file(url)
    if path is None or not usage_sqlite.supported():
        return SqlStore(database, shared=shared)
    timeout = SQLITE_BUSY_TIMEOUT_MS / 1000
    writer = usage_sqlite.SqliteUsageWriter(path, SQLITE_PRAGMAS, timeout)
    if usage_socket is None:
        return SqlStore(database, writer, shared=shared)
    through_host = HostUsageClient(usage_socket, writer, timeout_seconds)
    return SqlStore(database, through_host, shared=shared)


def _now() -> datetime:
    return datetime.now(UTC)
