"""A worker's store on a SQLite file: the work of serving in plain ``sqlite3``, the rest
through ``SqlStore``, loaded on its first use.

A worker serving /v1 calls the store from its background loops, and for the Responses
API's stored responses (``save_responses``, ``find_response``, ``find_turns``,
``delete_response``: ``store`` is true unless a call says otherwise): the key directory's
refresh (``list_groups``, ``keys_changed_since``, ``find_key``), the spend ledger
(``spend_since``, ``key_spend_since``), the channel, model and clone books
(``list_channels``, ``list_models``, ``list_clones``, ``list_deletions``), the breakers'
history (``record_channel_events``), the prunes (``prune_usage``,
``prune_channel_events``, ``purge_contents``, ``expired_files``, ``forget_files``,
``prune_responses``), the batch lane's watch (``runnable_batches``,
``batch_line_counts_of``, ``beat_batch_lane``, ``drop_batch_lanes``), the usage writer
(``record_usage``, ``usage_sqlite.py``), the alerts' and the health checker's audit
entries (``record_audit``), the content log of a group that keeps calls' content
(``save_contents``) and, at start, the check that the schema is at its head
(``migrate``). ``SqliteServingStore`` runs exactly those as plain SQL (``sqlite_queries.py``),
so such a worker never imports SQLAlchemy, nor the store's ``Table`` objects and queries.
Every other ``Store`` method (the admin API, voice cloning, files, batch lines, an upgrade
in this process) opens the full ``SqlStore`` on the same file the first time one is called
(``_full``) and is passed to it.

The two layers share one file and its text forms: timestamps are written and read as
``UtcDateTime`` does in SQLite (``plain.utc_text``, ``plain.utc_from_text``), and rows
become records through the one mapping both use (``records.py``). Queries run as units
of work on the store's own threads and connections (``sqlite_units.py``), by the rules
``SqlStore``'s ``ThreadedDatabase`` keeps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson

from parley.domain.accounts import Account
from parley.domain.audit import AuditEntry, AuditQuery
from parley.domain.batches import RUNNING, Batch, BatchLine, BatchPage
from parley.domain.channels import ChannelEvent, StoredChannel
from parley.domain.client_secrets import ClientSecret
from parley.domain.content import NO_CONTENT_LOGGING, ContentLogging, StoredContent
from parley.domain.files import FilePage, StoredFile
from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord
from parley.domain.requests import LoggedRequest, RequestQuery, StatusCounts
from parley.domain.responses import StoredResponse
from parley.domain.stored_models import StoredModel
from parley.domain.usage import DailyUsage, GroupDailyUsage, UsageRecord
from parley.domain.voices import Clone, PendingDeletion
from parley.store import records
from parley.store import sqlite_queries as queries
from parley.store.base import GroupChanges, KeyChanges, StoreFault, StoreUnavailable
from parley.store.boundary import database_errors
from parley.store.plain import head_revision, utc_text
from parley.store.sqlite_units import SqliteUnits

if TYPE_CHECKING:
    from parley.store.database import Database
    from parley.store.sql import SqlStore
    from parley.store.usage_host import HostUsageClient
    from parley.store.usage_sqlite import SqliteUsageWriter

DEFAULT_QUOTA = Quota()


class SqliteServingStore:
    """The store on a SQLite file, for a process that may never load SQLAlchemy; build
    it with ``opening.open_store``."""

    def __init__(
        self,
        url: str,
        path: str,
        usage: SqliteUsageWriter | HostUsageClient,
        *,
        pool_size: int,
        timeout_seconds: float,
    ) -> None:
        self._url = url
        self._usage = usage
        """The usage writer (``usage_sqlite.py``, or the host's, ``usage_host.py``)."""
        self._pool_size = pool_size
        self._timeout_seconds = timeout_seconds
        self._units = SqliteUnits(path, pool_size)
        self._closed = False
        self._sql: SqlStore | None = None
        """The full store, once a method of its own has been called."""

    # the schema and the store's life

    async def migrate(self, *, apart: bool = False) -> None:
        """Bring the schema to the newest migration, as ``SqlStore.migrate`` does: a file
        already at the head is left alone after one plain ``SELECT``; one behind is
        upgraded by a child process (``apart``, ``migrate_apart.py``) or by the full
        store here (loading SQLAlchemy and Alembic)."""
        head = head_revision()
        if head is not None and await self._revision() == head:
            return
        if not apart:
            await self._full().migrate()
            return
        from parley.store.migrate_apart import Target, run_child  # loads no SQLAlchemy

        await run_child(Target(self._url, None, self._timeout_seconds))

    async def _revision(self) -> str | None:
        """The revision the file is at; ``None`` if it has none yet or cannot say (it
        cannot be opened: the upgrade then says why), as ``engine.at_head`` reads it."""
        if self._closed:
            raise StoreUnavailable("the store is closed")
        try:
            return await self._units.read(queries.revision)
        except (StoreUnavailable, StoreFault):
            return None

    async def close(self) -> None:
        """Close the usage writer, wait for the units in flight, close every connection
        (and the full store, if it was opened); a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            with database_errors():
                await self._usage.close()
        finally:
            await self._units.close()
            if self._sql is not None:
                await self._sql.close()

    async def dispose(self) -> None:
        """Close every idle connection, this layer's and the full store's: the next unit
        of work opens the file again, and one in use now is closed when its unit ends (as
        ``Database.dispose`` does for a pool)."""
        await self._units.dispose()
        if self._sql is not None:
            await self._sql.database.dispose()

    @property
    def database(self) -> Database:
        """The full store's ``Database`` (opening it): what tests and tools read the
        file through with SQLAlchemy."""
        return self._full().database

    def _full(self) -> SqlStore:
        """The ``SqlStore`` on the same file, opened (and SQLAlchemy loaded) on first use."""
        if self._sql is None:
            if self._closed:
                raise StoreUnavailable("the store is closed")
            from parley.store.engine import open_database
            from parley.store.migrate_apart import Target
            from parley.store.sql import SqlStore

            database = open_database(
                self._url, pool_size=self._pool_size, schema=None, timeout=self._timeout_seconds
            )
            shared = Target(self._url, None, self._timeout_seconds)
            self._sql = SqlStore(database, shared=shared)  # usage is written here, not there
        return self._sql

    # groups and keys (the key directory)

    async def list_groups(self) -> list[Group]:
        return await self._units.read(queries.list_groups)

    async def keys_changed_since(self, since: datetime) -> list[KeyRecord]:
        return await self._units.read(queries.keys_changed_since, utc_text(since))

    async def find_key(self, digest: str) -> KeyRecord | None:
        return await self._units.read(queries.find_key, digest)

    # usage (the usage writer, the spend ledger, retention)

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        with database_errors():
            return await self._usage.record_usage(records)

    async def spend_since(self, day: date) -> dict[int, int]:
        return await self._units.read(queries.totals, queries.SPEND_SINCE, queries.day_text(day))

    async def key_spend_since(self, day: date) -> dict[int, int]:
        return await self._units.read(
            queries.totals, queries.KEY_SPEND_SINCE, queries.day_text(day)
        )

    async def prune_usage(self, before: datetime) -> int:
        return await self._units.write(queries.delete, queries.PRUNE_USAGE, (utc_text(before),))

    # voice clones (the clone book, the deletions' sweep)

    async def list_clones(
        self, *, model: str | None = None, group_id: int | None = None
    ) -> list[Clone]:
        rows = await self._units.read(queries.of_model_and_group, "voice_clones", model, group_id)
        return [records.clone(row) for row in rows]

    async def list_deletions(
        self, *, model: str | None = None, group_id: int | None = None
    ) -> list[PendingDeletion]:
        rows = await self._units.read(
            queries.of_model_and_group, "voice_deletions", model, group_id
        )
        return [records.deletion(row) for row in rows]

    # channels and models managed live (their books), the breakers' history

    async def list_channels(self) -> list[StoredChannel]:
        rows = await self._units.read(queries.rows, "channels", queries.LIST_CHANNELS, ())
        return [records.channel(row) for row in rows]

    async def record_channel_events(self, events: Sequence[ChannelEvent]) -> None:
        if events:
            await self._units.write(
                queries.record_channel_events, [queries.event_values(e) for e in events]
            )

    async def prune_channel_events(self, before: datetime) -> int:
        return await self._units.write(
            queries.delete, queries.PRUNE_CHANNEL_EVENTS, (utc_text(before),)
        )

    async def list_models(self) -> list[StoredModel]:
        rows = await self._units.read(queries.rows, "models", queries.LIST_MODELS, ())
        return [records.model(row) for row in rows]

    # the audit log (alerts and the health checker write to it while serving)

    async def record_audit(self, entry: AuditEntry) -> AuditEntry:
        detail = json.dumps(entry.detail, sort_keys=True)
        values = (utc_text(entry.created_at), entry.actor, entry.address, entry.action)
        row_id = await self._units.write(
            queries.insert, queries.RECORD_AUDIT, (*values, entry.target, detail)
        )
        return replace(entry, id=row_id)

    # calls' kept content (the content log, for a group whose policy keeps it)

    async def save_contents(self, contents: Sequence[StoredContent]) -> int:
        if not contents:
            return 0
        return await self._units.write(
            queries.changed, queries.SAVE_CONTENT, [queries.content_values(c) for c in contents]
        )

    # the prunes of kept content, files and stored responses

    async def purge_contents(self, most: int = 1000) -> int:
        return await self._units.write(
            queries.delete, queries.PURGE_CONTENTS, (utc_text(_now()), most)
        )

    async def expired_files(self, most: int) -> list[str]:
        return await self._units.read(queries.expired_files, utc_text(_now()), most)

    async def forget_files(self, file_ids: list[str]) -> int:
        if not file_ids:
            return 0
        return await self._units.write(
            queries.delete, queries.FORGET_FILES, (orjson.dumps(file_ids).decode(),)
        )

    async def save_responses(self, responses: Sequence[StoredResponse]) -> int:
        if not responses:
            return 0
        return await self._units.write(
            queries.changed, queries.SAVE_RESPONSE, [queries.response_values(r) for r in responses]
        )

    async def find_response(self, response_id: str, group_id: int) -> StoredResponse | None:
        found = await self._units.read(
            queries.rows,
            "stored_responses",
            queries.FIND_RESPONSE,
            (response_id, group_id, utc_text(_now())),
        )
        return records.stored_response(found[0]) if found else None

    async def find_turns(self, response_id: str, group_id: int, most: int) -> list[StoredResponse]:
        wanted = (response_id, group_id, utc_text(_now()), group_id, most)
        found = await self._units.read(queries.rows, "stored_responses", queries.FIND_TURNS, wanted)
        return [records.stored_response(row) for row in found]

    async def delete_response(self, response_id: str, group_id: int) -> bool:
        return await self._units.write(
            queries.delete_response, response_id, group_id, utc_text(_now())
        )

    async def prune_responses(self) -> int:
        return await self._units.write(queries.prune_responses, utc_text(_now()))

    # the batch lane's watch

    async def runnable_batches(self) -> list[Batch]:
        rows = await self._units.read(
            queries.rows, "batches", queries.RUNNABLE_BATCHES, tuple(RUNNING)
        )
        return [records.batch(row) for row in rows]

    async def batch_line_counts_of(self, batch_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = {batch_id: {} for batch_id in batch_ids}
        if not batch_ids:
            return found
        counted = await self._units.read(
            queries.line_counts, orjson.dumps(list(batch_ids)).decode()
        )
        for batch_id, state, count in counted:
            found[batch_id][state] = int(count)
        return found

    async def beat_batch_lane(self, lane: str, seconds: float) -> None:
        now = _now()
        until = now + timedelta(seconds=seconds)
        await self._units.write(queries.beat_lane, lane, utc_text(until), utc_text(now))

    async def drop_batch_lanes(self, lane: str, *, others: bool) -> None:
        await self._units.write(
            queries.delete, queries.DROP_OTHER_LANES if others else queries.DROP_LANE, (lane,)
        )

    # everything else: the full store's (``SqlStore``), opened on first use

    async def account_of_subject(self, subject: str) -> Account | None:
        return await self._full().account_of_subject(subject)

    async def add_account(self, account: Account) -> Account:
        return await self._full().add_account(account)

    async def add_batch(self, batch: Batch) -> None:
        return await self._full().add_batch(batch)

    async def add_batch_lines(self, lines: Sequence[BatchLine]) -> None:
        return await self._full().add_batch_lines(lines)

    async def add_channel(self, channel: StoredChannel) -> StoredChannel:
        return await self._full().add_channel(channel)

    async def add_client_secret(self, secret: ClientSecret) -> None:
        return await self._full().add_client_secret(secret)

    async def add_clone(self, clone: Clone) -> Clone:
        return await self._full().add_clone(clone)

    async def add_file(self, stored: StoredFile) -> None:
        return await self._full().add_file(stored)

    async def add_file_chunk(self, file_id: str, seq: int, data: bytes) -> None:
        return await self._full().add_file_chunk(file_id, seq, data)

    async def add_model(self, model: StoredModel) -> StoredModel:
        return await self._full().add_model(model)

    async def all_batch_results(
        self, batch_id: str, *, after: int, most: int
    ) -> list[tuple[int, str]]:
        return await self._full().all_batch_results(batch_id, after=after, most=most)

    async def batch_line_counts(self, batch_id: str) -> dict[str, int]:
        return await self._full().batch_line_counts(batch_id)

    async def batch_lines(
        self, batch_id: str, state: str, *, after: int = 0, most: int = 1000
    ) -> list[BatchLine]:
        return await self._full().batch_lines(batch_id, state, after=after, most=most)

    async def batch_results(
        self, batch_id: str, state: str, *, after: int, most: int
    ) -> list[tuple[int, str]]:
        return await self._full().batch_results(batch_id, state, after=after, most=most)

    async def channel_events(self, channel: str, limit: int = 100) -> list[ChannelEvent]:
        return await self._full().channel_events(channel, limit)

    async def claim_batch_lines(self, batch_id: str, lane: str, *, most: int) -> list[BatchLine]:
        return await self._full().claim_batch_lines(batch_id, lane, most=most)

    async def claim_deletion(
        self, deletion_id: int, now: datetime, until: datetime, *, due: bool
    ) -> PendingDeletion | None:
        return await self._full().claim_deletion(deletion_id, now, until, due=due)

    async def count_usage(self, group_id: int | None = None) -> int:
        return await self._full().count_usage(group_id)

    async def create_group(
        self,
        name: str,
        *,
        quota: Quota = DEFAULT_QUOTA,
        models: frozenset[str] | None = None,
        budget_nanos: int | None = None,
        content: ContentLogging = NO_CONTENT_LOGGING,
    ) -> Group:
        return await self._full().create_group(
            name, quota=quota, models=models, budget_nanos=budget_nanos, content=content
        )

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
        return await self._full().create_key(
            group_id,
            name=name,
            digest=digest,
            prefix=prefix,
            expires_at=expires_at,
            quota=quota,
            models=models,
            budget_nanos=budget_nanos,
            idempotency_key=idempotency_key,
        )

    async def daily_usage(self, group_id: int, start: date, end: date) -> list[DailyUsage]:
        return await self._full().daily_usage(group_id, start, end)

    async def delete_account(self, name: str) -> bool:
        return await self._full().delete_account(name)

    async def delete_batch(self, batch_id: str, group_id: int) -> bool:
        return await self._full().delete_batch(batch_id, group_id)

    async def delete_channel(self, name: str) -> bool:
        return await self._full().delete_channel(name)

    async def delete_clone(self, model: str, voice_id: str) -> bool:
        return await self._full().delete_clone(model, voice_id)

    async def delete_file(self, file_id: str, group_id: int) -> bool:
        return await self._full().delete_file(file_id, group_id)

    async def delete_file_chunks(self, file_id: str) -> None:
        return await self._full().delete_file_chunks(file_id)

    async def delete_model(self, name: str) -> bool:
        return await self._full().delete_model(name)

    async def deletion_failed(
        self, deletion_id: int, error: str, at: datetime, next_at: datetime
    ) -> PendingDeletion | None:
        return await self._full().deletion_failed(deletion_id, error, at, next_at)

    async def every_batch(
        self, group_id: int | None, *, status: str | None = None, limit: int
    ) -> list[Batch]:
        return await self._full().every_batch(group_id, status=status, limit=limit)

    async def every_file(self, group_id: int | None, *, limit: int) -> list[StoredFile]:
        return await self._full().every_file(group_id, limit=limit)

    async def failures_by_day(self, since: datetime) -> dict[date, StatusCounts]:
        return await self._full().failures_by_day(since)

    async def file_chunk(self, file_id: str, seq: int) -> bytes | None:
        return await self._full().file_chunk(file_id, seq)

    async def find_batch(self, batch_id: str, group_id: int | None) -> Batch | None:
        return await self._full().find_batch(batch_id, group_id)

    async def find_client_secret(self, digest: str) -> ClientSecret | None:
        return await self._full().find_client_secret(digest)

    async def find_content(self, request_id: str) -> StoredContent | None:
        return await self._full().find_content(request_id)

    async def find_deletion(self, deletion_id: int) -> PendingDeletion | None:
        return await self._full().find_deletion(deletion_id)

    async def find_file(self, file_id: str, group_id: int) -> StoredFile | None:
        return await self._full().find_file(file_id, group_id)

    async def find_request(self, request_id: str) -> LoggedRequest | None:
        return await self._full().find_request(request_id)

    async def finish_batch_lines(
        self, batch_id: str, outcomes: Sequence[tuple[int, str, str | None]], *, from_state: str
    ) -> int:
        return await self._full().finish_batch_lines(batch_id, outcomes, from_state=from_state)

    async def finish_deletion(self, deletion_id: int) -> bool:
        return await self._full().finish_deletion(deletion_id)

    async def get_account(self, name: str) -> Account | None:
        return await self._full().get_account(name)

    async def get_group(self, name: str) -> Group | None:
        return await self._full().get_group(name)

    async def group_file_bytes(self, group_id: int) -> int:
        return await self._full().group_file_bytes(group_id)

    async def key_usage_rollups(
        self, start: date, end: date, *, group_id: int | None = None, model: str | None = None
    ) -> list[GroupDailyUsage]:
        return await self._full().key_usage_rollups(start, end, group_id=group_id, model=model)

    async def keys_last_used(self, group_id: int | None = None) -> dict[int, datetime]:
        return await self._full().keys_last_used(group_id)

    async def list_accounts(self) -> list[Account]:
        return await self._full().list_accounts()

    async def list_audit(
        self, *, limit: int = 100, before_id: int | None = None, query: AuditQuery | None = None
    ) -> list[AuditEntry]:
        return await self._full().list_audit(limit=limit, before_id=before_id, query=query)

    async def list_batches(
        self,
        group_id: int,
        *,
        limit: int,
        after: str | None = None,
        before: str | None = None,
        messages: bool = False,
    ) -> BatchPage:
        return await self._full().list_batches(
            group_id, limit=limit, after=after, before=before, messages=messages
        )

    async def list_files(
        self,
        group_id: int,
        *,
        limit: int,
        after: str | None = None,
        ascending: bool = False,
        purpose: str | None = None,
    ) -> FilePage:
        return await self._full().list_files(
            group_id, limit=limit, after=after, ascending=ascending, purpose=purpose
        )

    async def list_keys(self, group_id: int | None = None) -> list[KeyRecord]:
        return await self._full().list_keys(group_id)

    async def list_requests(self, query: RequestQuery) -> list[LoggedRequest]:
        return await self._full().list_requests(query)

    async def mark_line_sent(self, batch_id: str, line: int, lane: str) -> bool:
        return await self._full().mark_line_sent(batch_id, line, lane)

    async def orphan_batch_lines(
        self, batch_id: str, state: str, lane: str, *, most: int
    ) -> list[BatchLine]:
        return await self._full().orphan_batch_lines(batch_id, state, lane, most=most)

    async def prefix_cost(self, prefix: str, group_id: int, since: datetime) -> tuple[int, int]:
        return await self._full().prefix_cost(prefix, group_id, since)

    async def prune_client_secrets(self, before: datetime) -> int:
        return await self._full().prune_client_secrets(before)

    async def release_batch_lines(
        self, batch_id: str, lines: Sequence[int], lane: str, *, from_state: str
    ) -> int:
        return await self._full().release_batch_lines(batch_id, lines, lane, from_state=from_state)

    async def replace_channel(
        self, channel: StoredChannel, *, if_updated_at: datetime | None = None
    ) -> StoredChannel:
        return await self._full().replace_channel(channel, if_updated_at=if_updated_at)

    async def replace_model(self, model: StoredModel) -> StoredModel:
        return await self._full().replace_model(model)

    async def requeue_orphan_lines(self, batch_id: str, lane: str) -> int:
        return await self._full().requeue_orphan_lines(batch_id, lane)

    async def retire_clone(
        self, clone: Clone, requested_at: datetime, claimed_until: datetime
    ) -> PendingDeletion | None:
        return await self._full().retire_clone(clone, requested_at, claimed_until)

    async def revoke_key(self, key_id: int, at: datetime) -> KeyRecord:
        return await self._full().revoke_key(key_id, at)

    async def rotate_key(
        self, key_id: int, *, digest: str, prefix: str, previous_until: datetime
    ) -> KeyRecord:
        return await self._full().rotate_key(
            key_id, digest=digest, prefix=prefix, previous_until=previous_until
        )

    async def set_batch_status(
        self, batch_id: str, status: str, *, only_from: Sequence[str], **columns: Any
    ) -> bool:
        return await self._full().set_batch_status(batch_id, status, only_from=only_from, **columns)

    async def set_group_disabled(self, name: str, at: datetime | None) -> Group:
        return await self._full().set_group_disabled(name, at)

    async def take_batch(self, batch_id: str, lane: str) -> bool:
        return await self._full().take_batch(batch_id, lane)

    async def update_account(self, name: str, changes: dict[str, Any]) -> Account:
        return await self._full().update_account(name, changes)

    async def update_group(self, name: str, changes: GroupChanges) -> Group:
        return await self._full().update_group(name, changes)

    async def update_key(self, key_id: int, changes: KeyChanges) -> KeyRecord:
        return await self._full().update_key(key_id, changes)

    async def usage_rollups(
        self, start: date, end: date, *, group_id: int | None = None, model: str | None = None
    ) -> list[GroupDailyUsage]:
        return await self._full().usage_rollups(start, end, group_id=group_id, model=model)


def _now() -> datetime:
    return datetime.now(UTC)
