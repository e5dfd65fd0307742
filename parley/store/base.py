"""The Store Protocol: everything Parley keeps on disk, as the roles its consumers use.

Each consumer names the small Protocol it needs (``KeyStore`` the key directory,
``UsageStore`` the usage writer and the budget ledger, ``VoiceStore`` the clone book,
``ResponseStore`` the response book, ``ContentStore`` the content log, ``FileStore``
the files API and the batch lane, ``BatchStore`` the batches API and the lane,
``ChannelStore`` the channel book, ``AccountStore`` sign-in, ``AdminStore`` the admin
surface); ``Store`` is all of them, held only by what opens and closes one.
Implementations: ``store.sql.SqlStore`` (SQLite and PostgreSQL through SQLAlchemy
Core) and, on a SQLite file, ``store.sqlite_serving.SqliteServingStore`` (what serving
calls on plain ``sqlite3``, the rest through ``SqlStore`` loaded on first use). One
contract suite (``tests/contract/test_store.py``) runs against each. The
request path never awaits a Store method: authentication reads an in-memory directory
that a background task refreshes, and usage records are written by the batched meter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Protocol

from parley.domain.accounts import Account
from parley.domain.audit import AuditEntry, AuditQuery
from parley.domain.batches import Batch, BatchLine, BatchPage
from parley.domain.channels import ChannelEvent, StoredChannel
from parley.domain.client_secrets import ClientSecret
from parley.domain.content import ContentLogging, ContentPolicy, StoredContent
from parley.domain.files import FilePage, StoredFile
from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord
from parley.domain.requests import LoggedRequest, RequestQuery, StatusCounts
from parley.domain.responses import StoredResponse
from parley.domain.stored_models import StoredModel
from parley.domain.usage import DailyUsage, GroupDailyUsage, UsageRecord
from parley.domain.voices import Clone, PendingDeletion


class StoreError(Exception):
    """A store operation failed for a reason the caller should report (not a bug)."""


class StoreUnavailable(StoreError):
    """The database could not be reached or could not do the work now (refused, dropped,
    timed out, too many connections, locked, its file unreadable or broken).

    ``store.boundary.database_errors`` raises it in place of the driver's own exceptions
    (SQLAlchemy, asyncpg, sqlite3, OSError) that say so, so nothing outside
    ``parley/store/`` names them. Retrying later may succeed; the HTTP edge answers it
    with 503 and ``retry-after``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the database is unavailable: {reason}")
        self.reason = reason


class StoreFault(StoreError):
    """The database answered and refused the work itself: the query, a value or the
    schema is at fault (a bug, a constraint other than a unique name, a column or table a
    migration has not made).

    ``store.boundary.database_errors`` raises it for every driver exception that is
    neither ``StoreUnavailable`` nor ``Conflict``. The same work fails the same way until
    the code or the schema changes, so it is not the database being away: the HTTP edge
    answers 500 (``server_error``, the envelope of any internal error) and logs
    ``reason``, one line.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the database refused the query: {reason}")
        self.reason = reason


class Conflict(StoreError):
    """A unique name is taken."""


class Replay(StoreError):
    """A key was already created with this idempotency key: ``record`` is that key."""

    def __init__(self, record: KeyRecord) -> None:
        super().__init__(f"key {record.id} was created with this idempotency key")
        self.record = record


class Missing(StoreError):
    """The named group or key does not exist."""


@dataclass(frozen=True, slots=True)
class GroupChanges:
    """Fields to change on a group; ``None`` leaves a field as it is."""

    rpm: int | None = None
    tpm: int | None = None
    models: frozenset[str] | None = None
    budget_nanos: int | None = None
    clear_rpm: bool = False
    clear_tpm: bool = False
    clear_models: bool = False
    clear_budget: bool = False
    content_policy: ContentPolicy | None = None
    content_retention_days: int | None = None


class ContentStore(Protocol):
    """Calls' kept content (``store/contents_sql.py``): written by the content log
    (``runtime/content_log.py``), read by the admin surface, purged when it expires."""

    async def save_contents(self, contents: Sequence[StoredContent]) -> int:
        """Store each one not stored yet (by request id); how many were new."""

    async def find_content(self, request_id: str) -> StoredContent | None:
        """The call's unexpired content, or ``None``."""

    async def purge_contents(self, most: int = 1000) -> int:
        """Delete up to ``most`` expired rows; how many were deleted."""


class ResponseStore(Protocol):
    """Stored responses of the Responses API (``store/responses_sql.py``). Reads and
    deletes name the group: another group's response is not found."""

    async def save_responses(self, responses: Sequence[StoredResponse]) -> int:
        """Store each response not stored yet; how many were new."""

    async def find_response(self, response_id: str, group_id: int) -> StoredResponse | None:
        """The group's unexpired response with this id, or ``None``."""

    async def find_turns(self, response_id: str, group_id: int, most: int) -> list[StoredResponse]:
        """The group's unexpired response with this id and the turns it continues,
        newest first, at most ``most``; ``[]`` when it has none with this id."""

    async def delete_response(self, response_id: str, group_id: int) -> bool:
        """Delete the group's response; ``False`` if it had none with this id."""

    async def prune_responses(self) -> int:
        """Delete every expired response; how many were."""


class FileStore(Protocol):
    """Uploaded files' metadata, and their bytes in chunks where the database keeps them
    (``store/files_sql.py``). Reads and deletes name the group: another group's file is
    not found, nor is an expired one."""

    async def add_file(self, stored: StoredFile) -> None:
        """Record a file whose bytes are written."""

    async def find_file(self, file_id: str, group_id: int) -> StoredFile | None: ...

    async def list_files(
        self,
        group_id: int,
        *,
        limit: int,
        after: str | None = None,
        ascending: bool = False,
        purpose: str | None = None,
    ) -> FilePage:
        """A page of the group's files in creation order (newest first unless
        ``ascending``), those after the id ``after``."""

    async def every_file(self, group_id: int | None, *, limit: int) -> list[StoredFile]:
        """The newest unexpired files, of one group or (``None``) every group's."""

    async def delete_file(self, file_id: str, group_id: int) -> bool:
        """Forget the group's file; ``False`` if it had none with this id."""

    async def group_file_bytes(self, group_id: int) -> int:
        """What the group's files hold, in bytes."""

    async def expired_files(self, most: int) -> list[str]:
        """Ids of expired files (any group's), at most ``most``."""

    async def forget_files(self, file_ids: list[str]) -> int:
        """Delete these files' metadata (pruning); how many were."""

    async def add_file_chunk(self, file_id: str, seq: int, data: bytes) -> None:
        """Store the ``seq``-th piece of a file's bytes."""

    async def file_chunk(self, file_id: str, seq: int) -> bytes | None:
        """The ``seq``-th piece of a file's bytes; ``None`` past its end."""

    async def delete_file_chunks(self, file_id: str) -> None: ...


class BatchStore(Protocol):
    """Batches and their lines (``store/batches_sql.py``): the batches API reads them by
    group (another group's batch is not found), the lane runs them by id."""

    async def add_batch(self, batch: Batch) -> None: ...

    async def add_batch_lines(self, lines: Sequence[BatchLine]) -> None: ...

    async def find_batch(self, batch_id: str, group_id: int | None) -> Batch | None:
        """The batch, if it is the group's (any group's when ``group_id`` is ``None``)."""

    async def list_batches(
        self,
        group_id: int,
        *,
        limit: int,
        after: str | None = None,
        before: str | None = None,
        messages: bool = False,
    ) -> BatchPage:
        """The group's batches, newest first: its Message Batches alone (``messages``),
        or its other batches alone."""

    async def every_batch(
        self, group_id: int | None, *, status: str | None = None, limit: int
    ) -> list[Batch]:
        """The newest batches of both kinds, of one group or (``None``) every group's."""

    async def set_batch_status(
        self, batch_id: str, status: str, *, only_from: Sequence[str], **columns: Any
    ) -> bool:
        """Move the batch to ``status`` (stamped now) if it is in one of ``only_from``."""

    async def runnable_batches(self) -> list[Batch]: ...

    async def delete_batch(self, batch_id: str, group_id: int) -> bool:
        """Delete the group's batch and its lines if it has ended."""

    async def batch_lines(
        self, batch_id: str, state: str, *, after: int = 0, most: int = 1000
    ) -> list[BatchLine]: ...

    async def claim_batch_lines(self, batch_id: str, lane: str, *, most: int) -> list[BatchLine]:
        """Take queued lines of a batch in progress for ``lane``; no two lanes take one."""

    async def mark_line_sent(self, batch_id: str, line: int, lane: str) -> bool:
        """Record a line ``lane`` claimed as sent, while its batch is in progress and
        not past its expiry; ``False``: it must not be sent."""

    async def release_batch_lines(
        self, batch_id: str, lines: Sequence[int], lane: str, *, from_state: str
    ) -> int:
        """Put ``lane``'s lines never sent (in ``from_state``) back in the queue."""

    async def finish_batch_lines(
        self, batch_id: str, outcomes: Sequence[tuple[int, str, str | None]], *, from_state: str
    ) -> int:
        """End each line ``(line, state, result)`` still in ``from_state``, counting the
        ``done`` and ``failed`` ones on the batch, in one transaction."""

    async def batch_results(
        self, batch_id: str, state: str, *, after: int, most: int
    ) -> list[tuple[int, str]]: ...

    async def all_batch_results(
        self, batch_id: str, *, after: int, most: int
    ) -> list[tuple[int, str]]: ...

    async def batch_line_counts(self, batch_id: str) -> dict[str, int]: ...

    async def batch_line_counts_of(self, batch_ids: Sequence[str]) -> dict[str, dict[str, int]]: ...

    async def orphan_batch_lines(
        self, batch_id: str, state: str, lane: str, *, most: int
    ) -> list[BatchLine]:
        """The batch's lines in ``state`` held by a lane whose lease ran out, or none
        (``lane``, the one asking, counts as alive)."""

    async def requeue_orphan_lines(self, batch_id: str, lane: str) -> int:
        """Put back in the queue the lines a dead lane had claimed (never sent)."""

    async def take_batch(self, batch_id: str, lane: str) -> bool:
        """Make ``lane`` the one that ends the batch, unless a live lane already is."""

    async def beat_batch_lane(self, lane: str, seconds: float) -> None:
        """Renew ``lane``'s lease for ``seconds``."""

    async def drop_batch_lanes(self, lane: str, *, others: bool) -> None:
        """End ``lane``'s lease, or (``others``) every lease but its own."""


@dataclass(frozen=True, slots=True)
class KeyChanges:
    """Fields to change on a key; ``None`` leaves a field as it is."""

    name: str | None = None
    rpm: int | None = None
    tpm: int | None = None
    models: frozenset[str] | None = None
    budget_nanos: int | None = None
    expires_at: datetime | None = None
    clear_rpm: bool = False
    clear_tpm: bool = False
    clear_models: bool = False
    clear_budget: bool = False
    clear_expiry: bool = False


class KeyStore(Protocol):
    """Groups and their keys (``store/keys_sql.py``): the key directory reads them
    (``pipeline/directory.py``) and the admin surface changes them."""

    async def create_group(
        self,
        name: str,
        *,
        quota: Quota = Quota(),
        models: frozenset[str] | None = None,
        budget_nanos: int | None = None,
        content: ContentLogging = ContentLogging(),
    ) -> Group:
        """Raises ``Conflict`` when the name is taken."""

    async def update_group(self, name: str, changes: GroupChanges) -> Group:
        """Raises ``Missing`` when there is no such group."""

    async def get_group(self, name: str) -> Group | None: ...

    async def list_groups(self) -> list[Group]: ...

    async def set_group_disabled(self, name: str, at: datetime | None) -> Group:
        """Disable the group at ``at``, or enable it (``None``). Raises ``Missing``."""

    async def create_key(
        self,
        group_id: int,
        *,
        name: str,
        digest: str,
        prefix: str,
        expires_at: datetime | None = None,
        quota: Quota = Quota(),
        models: frozenset[str] | None = None,
        budget_nanos: int | None = None,
        idempotency_key: str | None = None,
    ) -> KeyRecord:
        """Raises ``Missing`` when the group does not exist, and ``Replay`` when a key
        was already created with ``idempotency_key``."""

    async def find_key(self, digest: str) -> KeyRecord | None: ...

    async def list_keys(self, group_id: int | None = None) -> list[KeyRecord]: ...

    async def revoke_key(self, key_id: int, at: datetime) -> KeyRecord:
        """Raises ``Missing`` when there is no such key; revoking twice keeps the first time."""

    async def keys_changed_since(self, since: datetime) -> list[KeyRecord]:
        """Keys created, revoked or changed at or after ``since`` (by ``updated_at``)."""

    async def update_key(self, key_id: int, changes: KeyChanges) -> KeyRecord:
        """Raises ``Missing`` when there is no such key."""

    async def rotate_key(
        self, key_id: int, *, digest: str, prefix: str, previous_until: datetime
    ) -> KeyRecord:
        """Give the key a new secret (``digest``, ``prefix``); the one it replaces stays
        accepted until ``previous_until``. Raises ``Missing``."""


class UsageStore(Protocol):
    """Usage records and their daily rollups (``store/usage_sql.py``): the usage writer
    adds them, the budget ledger and the billing endpoints read them, retention prunes them."""

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        """Insert raw records and add them to the daily rollups in one transaction.

        A record whose ``request_id`` is already stored is skipped (and not added to the
        rollups again). Returns how many were new.
        """

    async def daily_usage(self, group_id: int, start: date, end: date) -> list[DailyUsage]:
        """Rollup rows for ``start <= day < end``, ordered by day then model."""

    async def spend_since(self, day: date) -> dict[int, int]:
        """Cost in nano-dollars per group id, summed from the rollups for days >= ``day``."""

    async def key_spend_since(self, day: date) -> dict[int, int]:
        """Cost in nano-dollars per key id, from the per-key rollups for days >= ``day``."""

    async def count_usage(self, group_id: int | None = None) -> int:
        """How many raw usage records of admitted calls are kept (refusals, which are
        request-log lines only, are not counted)."""

    async def prune_usage(self, before: datetime) -> int:
        """Delete raw records created before ``before``; rollups are kept. Returns the count."""


class VoiceStore(Protocol):
    """The registry of what each group cloned (``store/voices_sql.py``), kept in memory by
    the clone book (``voices/book.py``), and the deleted clones whose engine copies are
    still to delete (``voices/deletions.py``)."""

    async def add_clone(self, clone: Clone) -> Clone:
        """Raises ``Conflict`` when the model already has a clone with this voice id."""

    async def list_clones(
        self, *, model: str | None = None, group_id: int | None = None
    ) -> list[Clone]:
        """Clones, oldest first, of one model and/or one group (all when not given)."""

    async def delete_clone(self, model: str, voice_id: str) -> bool:
        """Forget a clone; False when there was none."""

    async def retire_clone(
        self, clone: Clone, requested_at: datetime, claimed_until: datetime
    ) -> PendingDeletion | None:
        """Forget a clone and record its engine copy as still to delete, in one
        transaction, claimed until ``claimed_until``; ``None`` when there was no clone."""

    async def list_deletions(
        self, *, model: str | None = None, group_id: int | None = None
    ) -> list[PendingDeletion]:
        """Deletions still to do, oldest first, of one model and/or one group."""

    async def find_deletion(self, deletion_id: int) -> PendingDeletion | None: ...

    async def claim_deletion(
        self, deletion_id: int, now: datetime, until: datetime, *, due: bool
    ) -> PendingDeletion | None:
        """Hold a deletion until ``until`` for one attempt; ``None`` when it is not due
        (with ``due``), another claim won, or it is gone."""

    async def deletion_failed(
        self, deletion_id: int, error: str, at: datetime, next_at: datetime
    ) -> PendingDeletion | None:
        """Count a failed attempt; ``None`` when the deletion is gone."""

    async def finish_deletion(self, deletion_id: int) -> bool:
        """Forget a deletion (done, or given up); False when there was none."""


class ClientSecretStore(Protocol):
    """Realtime client secrets by digest (``store/client_secrets_sql.py``), kept in memory
    by the secrets book (``runtime/client_secrets.py``)."""

    async def add_client_secret(self, secret: ClientSecret) -> None: ...

    async def find_client_secret(self, digest: str) -> ClientSecret | None: ...

    async def prune_client_secrets(self, before: datetime) -> int:
        """Forget the secrets that expired before ``before``; how many there were."""


class ChannelStore(Protocol):
    """Channels managed from the admin surface (the config file's are not stored) and
    their history (``store/channels_sql.py``): the channel book routes to them, the
    admin surface changes them."""

    async def list_channels(self) -> list[StoredChannel]:
        """Every stored channel, by name."""

    async def add_channel(self, channel: StoredChannel) -> StoredChannel:
        """Raises ``Conflict`` when the name is taken."""

    async def replace_channel(
        self, channel: StoredChannel, *, if_updated_at: datetime | None = None
    ) -> StoredChannel:
        """Rewrite the named channel; raises ``Missing`` when there is none. With
        ``if_updated_at`` (the ``updated_at`` the caller read), only if nobody changed it
        since: ``Conflict`` otherwise, and nothing written (the health checker never
        undoes an operator's change it did not see)."""

    async def delete_channel(self, name: str) -> bool:
        """Forget a channel; False when there was none."""

    async def record_channel_events(self, events: Sequence[ChannelEvent]) -> None:
        """Append breaker transitions and test results."""

    async def channel_events(self, channel: str, limit: int = 100) -> list[ChannelEvent]:
        """The channel's newest events first."""

    async def prune_channel_events(self, before: datetime) -> int:
        """Delete events older than ``before`` (kept as long as usage records)."""


class ModelStore(Protocol):
    """Models managed from the admin surface (the config file's are not stored;
    ``store/models_sql.py``): the model book serves them, the admin surface changes
    them."""

    async def list_models(self) -> list[StoredModel]:
        """Every stored model, by name."""

    async def add_model(self, model: StoredModel) -> StoredModel:
        """Raises ``Conflict`` when the name is taken."""

    async def replace_model(self, model: StoredModel) -> StoredModel:
        """Rewrite the named model; raises ``Missing`` when there is none."""

    async def delete_model(self, name: str) -> bool:
        """Forget a model; False when there was none."""


class AccountStore(Protocol):
    """Administrator accounts (``store/channels_sql.py``): sign-in and the accounts
    page."""

    async def list_accounts(self) -> list[Account]: ...

    async def get_account(self, name: str) -> Account | None: ...

    async def account_of_subject(self, subject: str) -> Account | None:
        """The account bound to a single sign-on identity (``Account.sso_subject``)."""

    async def add_account(self, account: Account) -> Account:
        """Raises ``Conflict`` when the name (or the single sign-on identity) is taken."""

    async def update_account(self, name: str, changes: dict[str, Any]) -> Account:
        """Set columns (``role``, ``password_hash``, ``disabled_at``, ``sso_subject``);
        raises ``Missing``."""

    async def delete_account(self, name: str) -> bool: ...


class AuditStore(Protocol):
    """The audit log: appended to by whoever changes something, read by the admin
    surface."""

    async def record_audit(self, entry: AuditEntry) -> AuditEntry:
        """Append an entry; returns it with its id."""

    async def list_audit(
        self, *, limit: int = 100, before_id: int | None = None, query: AuditQuery | None = None
    ) -> list[AuditEntry]:
        """The newest entries first that match ``query``; ``before_id`` pages back."""


class AdminStore(
    KeyStore, UsageStore, VoiceStore, AccountStore, AuditStore, ContentStore, Protocol
):
    """What the admin surface uses (``AdminService``, and through it the admin API, the
    dashboard and the CLI): groups and keys, usage, clones and accounts, the audit log,
    and what only it reads (``store/admin_sql.py``, ``store/requests_sql.py``): every
    group's rollups, failures per day, each key's last use and the request log."""

    async def usage_rollups(
        self, start: date, end: date, *, group_id: int | None = None, model: str | None = None
    ) -> list[GroupDailyUsage]:
        """Rollup rows of every group (or one, or one model) for ``start <= day < end``."""

    async def key_usage_rollups(
        self, start: date, end: date, *, group_id: int | None = None, model: str | None = None
    ) -> list[GroupDailyUsage]:
        """Per-key rollup rows (of every key, or one group's, or one model's) for
        ``start <= day < end``."""

    async def failures_by_day(self, since: datetime) -> dict[date, StatusCounts]:
        """Failed calls and refusals (status >= 400) per UTC day, counted apart: 4xx but
        429, 429, and 5xx; from the raw records since ``since``."""

    async def keys_last_used(self, group_id: int | None = None) -> dict[int, datetime]:
        """Each key's latest call, by key id (keys never used are absent)."""

    async def list_requests(self, query: RequestQuery) -> list[LoggedRequest]:
        """The request log's lines (the raw usage records, refusals included) matching
        ``query``, newest first, at most ``query.limit``."""

    async def find_request(self, request_id: str) -> LoggedRequest | None: ...

    async def prefix_cost(self, prefix: str, group_id: int, since: datetime) -> tuple[int, int]:
        """The cost (nano-USD) and number of the group's request log lines since
        ``since`` whose request id starts with ``prefix`` (a batch's lines)."""


class CheckStore(ChannelStore, AuditStore, Protocol):
    """What the channels' health checker uses (``runtime/health_checks.py``): the stored
    channels, their history, and the audit log of what it disabled or enabled."""


class Store(
    AdminStore,
    ChannelStore,
    ModelStore,
    ResponseStore,
    FileStore,
    BatchStore,
    ClientSecretStore,
    Protocol,
):
    """Everything Parley keeps: every role, and the schema's lifecycle.

    What opens and closes a store holds all of it (``Services``, the CLI's
    ``with_store``); every other consumer names the role it uses."""

    async def migrate(self) -> None:
        """Bring the schema to the newest migration (idempotent)."""

    async def close(self) -> None: ...
