"""``AdminService``: every admin action and view, used by the admin API, the dashboard
and the CLI alike (no second code path).

Each change is written to the audit log with its actor, and told to this instance's
directory (when there is one: the CLI has none) so it applies here at once; other
instances and workers pick it up with their next directory refresh, so the request
path never waits on the database.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from parley.admin.reports import UsageQuery, UsageReport, build_report
from parley.admin.views import (
    Budget,
    KeyState,
    group_detail,
    key_detail,
    key_name,
    key_status,
)
from parley.domain.audit import Actor, AuditEntry, AuditQuery
from parley.domain.content import NO_CONTENT_LOGGING, ContentLogging, StoredContent
from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord, digest, display_prefix, new_key
from parley.domain.voices import Clone, Deleted, PendingDeletion
from parley.errors import InvalidRequest, NotFound, Replayed, ServiceUnavailable
from parley.runtime.budget import Period, SpendLedger, next_period_start, period_start
from parley.runtime.directory import Directory
from parley.store.base import AdminStore, Conflict, GroupChanges, KeyChanges, Missing, Replay

MAX_STORED_NAME = 200
GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
GROUP_NAME_RULE = (
    "1 to 64 characters: letters A-Z and a-z, digits, '.', '_' and '-', "
    "starting with a letter or a digit"
)


def findable(name: str) -> bool:
    """Whether ``name`` could name a stored group at all (else it is simply not found,
    without asking a database that may refuse such bytes)."""
    return len(name) <= MAX_STORED_NAME and name.isprintable()


def check_group_name(name: str) -> str:
    if not GROUP_NAME.fullmatch(name):
        raise InvalidRequest(f"A group name is {GROUP_NAME_RULE}; got {name!r}.", param="name")
    return name


def changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The settings that differ, each as ``{"before": ..., "after": ...}`` (an audit
    entry's ``changed``, which the dashboard shows as before → after)."""
    return {
        name: {"before": before.get(name), "after": value}
        for name, value in after.items()
        if before.get(name) != value
    }


class KeyReplayed(Replayed):
    """A key request sent again with its idempotency key: ``key_id`` is what it made."""

    def __init__(self, record: KeyRecord) -> None:
        super().__init__(
            f"This request was already made: it created key {record.id} "
            f"({record.prefix}…), whose secret was shown once, to that request.",
            param="idempotency_key",
        )
        self.key_id = record.id


Unclone = Callable[[Clone], Awaitable[Deleted]]
"""Deletes a registered clone: out of the registry, then on its engine (the ``/v1``
path's own deletion)."""
RetryDeletion = Callable[[int], Awaitable[PendingDeletion | None]]
"""Attempts a recorded deletion on its engine now; the row after it (``None``: done)."""


class AdminService:
    def __init__(
        self,
        store: AdminStore,
        actor: Actor,
        *,
        period: Period = "month",
        directory: Directory | None = None,
        ledger: SpendLedger | None = None,
        unclone: Unclone | None = None,
        retry_deletion: RetryDeletion | None = None,
    ) -> None:
        self.store = store
        self._unclone = unclone
        self._retry_deletion = retry_deletion
        self.actor = actor
        self.period: Period = ledger.period if ledger is not None else period
        self._directory = directory
        self._ledger = ledger
        self.scope: Group | None = None
        """The one group this service shows (a group-admin's, ``group_scope.py``);
        None: every group."""

    async def audit(self, action: str, target: str, **detail: Any) -> None:
        entry = AuditEntry(
            created_at=datetime.now(UTC),
            actor=self.actor.who,
            address=self.actor.address,
            action=action,
            target=target,
            detail=detail,
        )
        await self.store.record_audit(entry)

    # groups

    async def groups(self) -> list[Group]:
        return await self.store.list_groups()

    async def group(self, name: str) -> Group:
        group = await self.store.get_group(name) if findable(name) else None
        if group is None:
            raise NotFound(f"No group named '{name}'.", param="name")
        return group

    async def create_group(
        self,
        name: str,
        *,
        quota: Quota = Quota(),
        models: frozenset[str] | None = None,
        budget_nanos: int | None = None,
        content: ContentLogging = NO_CONTENT_LOGGING,
    ) -> Group:
        check_group_name(name)
        try:
            group = await self.store.create_group(
                name, quota=quota, models=models, budget_nanos=budget_nanos, content=content
            )
        except Conflict:
            raise InvalidRequest(
                f"A group named '{name}' already exists.", param="name", code="conflict"
            ) from None
        self._remember_group(group)
        await self.audit("group.create", name, **group_detail(group))
        return group

    async def update_group(self, name: str, changes: GroupChanges) -> Group:
        try:
            if not findable(name):
                raise Missing(name)
            before = await self.store.get_group(name)
            if before is None:
                raise Missing(name)
            group = await self.store.update_group(name, changes)
        except Missing:
            raise NotFound(f"No group named '{name}'.", param="name") from None
        self._remember_group(group)
        after = group_detail(group)
        await self.audit(
            "group.update", name, **after, changed=changed(group_detail(before), after)
        )
        return group

    async def set_disabled(self, name: str, disabled: bool) -> Group:
        at = datetime.now(UTC) if disabled else None
        try:
            if not findable(name):
                raise Missing(name)
            group = await self.store.set_group_disabled(name, at)
        except Missing:
            raise NotFound(f"No group named '{name}'.", param="name") from None
        self._remember_group(group)
        await self.audit("group.disable" if disabled else "group.enable", name)
        return group

    def _remember_group(self, group: Group) -> None:
        if self._directory is not None:
            self._directory.remember_group(group)

    async def budget(self, group: Group) -> Budget:
        """The group's budget and its spend this period (the live ledger when serving)."""
        now = datetime.now(UTC)
        start = period_start(self.period, now)
        if self._ledger is not None:
            spent = self._ledger.spent(group.id)
        else:
            spent = (await self.store.spend_since(start)).get(group.id, 0)
        end = next_period_start(self.period, now)
        return Budget(self.period, start, end, group.budget_nanos, spent)

    # keys

    async def keys(self, group_name: str | None = None) -> list[KeyState]:
        group_id = (await self.group(group_name)).id if group_name is not None else None
        records = await self.store.list_keys(group_id)
        last_used = await self.store.keys_last_used(group_id)
        groups = {group.id: group for group in await self.store.list_groups()}
        now = datetime.now(UTC)
        return [
            KeyState(r, key_status(r, now, groups.get(r.group_id)), last_used.get(r.id))
            for r in records
        ]

    async def create_key(
        self,
        group_name: str,
        *,
        name: str = "",
        expires_in_days: int | None = None,
        quota: Quota = Quota(),
        models: frozenset[str] | None = None,
        budget_nanos: int | None = None,
        idempotency_key: str | None = None,
    ) -> tuple[KeyState, str]:
        """The new key and its secret, which is never shown again. A second request with
        the same ``idempotency_key`` (a form sent twice) creates nothing: ``Replayed``."""
        group = await self.store.get_group(group_name) if findable(group_name) else None
        if group is None:
            names = [group.name for group in await self.store.list_groups()]
            known = f"The groups are: {', '.join(names)}." if names else "There are no groups yet."
            raise InvalidRequest(f"No group named '{group_name}'. {known}", param="group")
        secret = new_key()
        expires = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None
        try:
            record = await self.store.create_key(
                group.id,
                name=name,
                digest=digest(secret),
                prefix=display_prefix(secret),
                expires_at=expires,
                quota=quota,
                models=models,
                budget_nanos=budget_nanos,
                idempotency_key=idempotency_key,
            )
        except Replay as replay:
            raise KeyReplayed(replay.record) from None
        if self._directory is not None:
            self._directory.remember_key(record)
        await self.audit(
            "key.create",
            f"key {record.id} ({record.prefix}…)",
            group=group.name,
            **key_detail(record),
        )
        return await self.key_state(record), secret

    async def key_state(self, record: KeyRecord) -> KeyState:
        last_used = (await self.store.keys_last_used(record.group_id)).get(record.id)
        groups = {group.id: group for group in await self.store.list_groups()}
        status = key_status(record, datetime.now(UTC), groups.get(record.group_id))
        return KeyState(record, status, last_used)

    async def revoke_key(self, key_id: int) -> KeyState:
        try:
            record = await self.store.revoke_key(key_id, datetime.now(UTC))
        except Missing:
            raise NotFound(f"No key with id '{key_id}'.", param="key_id") from None
        if self._directory is not None:
            self._directory.remember_key(record)
        await self.audit("key.revoke", f"key {record.id} ({record.prefix}…)")
        return await self.key_state(record)

    async def find_key(self, key_id: int) -> KeyState:
        found = [r for r in await self.store.list_keys() if r.id == key_id]
        if not found:
            raise NotFound(f"No key with id '{key_id}'.", param="key_id")
        return await self.key_state(found[0])

    async def update_key(self, key_id: int, changes: KeyChanges) -> KeyState:
        """Change a key's label, rates, models, budget or expiry; audited with its
        settings after and what changed (``changed``: each field's before and after)."""
        before = next((r for r in await self.store.list_keys() if r.id == key_id), None)
        try:
            if before is None:
                raise Missing(str(key_id))
            record = await self.store.update_key(key_id, changes)
        except Missing:
            raise NotFound(f"No key with id '{key_id}'.", param="key_id") from None
        if self._directory is not None:
            self._directory.remember_key(record)
        after = key_detail(record)
        await self.audit(
            "key.update",
            f"key {record.id} ({record.prefix}…)",
            **after,
            changed=changed(key_detail(before), after),
        )
        return await self.key_state(record)

    async def rotate_key(self, key_id: int, grace: timedelta) -> tuple[KeyState, str]:
        """A new secret for the key (shown once); the old one works for ``grace`` more."""
        secret = new_key()
        until = datetime.now(UTC) + grace
        try:
            record = await self.store.rotate_key(
                key_id, digest=digest(secret), prefix=display_prefix(secret), previous_until=until
            )
        except Missing:
            raise NotFound(f"No key with id '{key_id}'.", param="key_id") from None
        if self._directory is not None:
            self._directory.remember_key(record)
        await self.audit(
            "key.rotate",
            f"key {record.id} ({record.prefix}…)",
            old_prefix=record.prefix_of(previous=True),
            old_secret_valid_until=until.isoformat(timespec="seconds"),
        )
        return await self.key_state(record), secret

    async def key_budget(self, record: KeyRecord) -> Budget:
        """The key's own budget and its spend this period (the live ledger when serving)."""
        now = datetime.now(UTC)
        start = period_start(self.period, now)
        if self._ledger is not None:
            spent = self._ledger.key_spent(record.id)
        else:
            spent = (await self.store.key_spend_since(start)).get(record.id, 0)
        end = next_period_start(self.period, now)
        return Budget(self.period, start, end, record.budget_nanos, spent)

    # voices

    async def clones(self, group_name: str | None = None, model: str | None = None) -> list[Clone]:
        """Every group's clones, oldest first, of one group and/or one model."""
        group_id = (await self.group(group_name)).id if group_name is not None else None
        if model is not None and not findable(model):
            return []
        return await self.store.list_clones(model=model, group_id=group_id)

    async def delete_clone(self, model: str, voice_id: str) -> Deleted:
        """Delete a clone: out of the registry, then on its engine (what the engine did
        not delete stays recorded and is retried); audited."""
        found = [
            clone
            for clone in (await self.store.list_clones(model=model) if findable(model) else [])
            if clone.voice_id.lower() == voice_id.lower()
        ]
        if not found:
            raise NotFound(
                f"No cloned voice `{voice_id}` on the model `{model}`.",
                param="voice_id",
                code="voice_not_found",
            )
        if self._unclone is None:
            raise ServiceUnavailable("Voices can be deleted only by a running gateway.")
        deleted = await self._unclone(found[0])
        clone = deleted.clone
        names = {group.id: group.name for group in await self.store.list_groups()}
        await self.audit(
            "voice.delete",
            f"voice {clone.voice_id} ({clone.model})",
            group=names.get(clone.group_id),
            label=clone.label,
            channel=clone.channel,
            engine="deleted" if deleted.pending is None else "pending",
        )
        return deleted

    async def clone_deletions(
        self, group_name: str | None = None, model: str | None = None
    ) -> list[PendingDeletion]:
        """Deleted clones whose engine copies are still to delete, oldest first."""
        group_id = (await self.group(group_name)).id if group_name is not None else None
        if model is not None and not findable(model):
            return []
        return await self.store.list_deletions(model=model, group_id=group_id)

    async def clone_deletion(self, deletion_id: int) -> PendingDeletion:
        found = await self.store.find_deletion(deletion_id)
        if found is None:
            raise _no_deletion(deletion_id)
        return found

    async def retry_clone_deletion(
        self, deletion_id: int
    ) -> tuple[PendingDeletion, PendingDeletion | None]:
        """Attempt a recorded deletion on its engine now, due or not: the row before the
        attempt and after it (``None``: the engine no longer holds the voice); audited."""
        before = await self.clone_deletion(deletion_id)
        if self._retry_deletion is None:
            raise ServiceUnavailable("Engines are reached only by a running gateway.")
        try:
            after = await self._retry_deletion(deletion_id)
        except LookupError:
            raise _no_deletion(deletion_id) from None
        await self.audit(
            "voice.deletion_retry",
            _deletion_target(before),
            group=await self._group_name(before.group_id),
            channel=before.channel,
            outcome="deleted" if after is None else "failed",
            attempts=before.attempts if after is None else after.attempts,
            error=None if after is None else after.last_error,
        )
        return before, after

    async def abandon_clone_deletion(self, deletion_id: int) -> PendingDeletion:
        """Stop trying to delete a clone on its engine (the engine may still hold it: the
        operator takes it from here); audited with what was last known."""
        before = await self.clone_deletion(deletion_id)
        if not await self.store.finish_deletion(deletion_id):
            raise _no_deletion(deletion_id)
        await self.audit(
            "voice.deletion_abandon",
            _deletion_target(before),
            group=await self._group_name(before.group_id),
            label=before.label,
            channel=before.channel,
            engine_name=before.engine_name,
            attempts=before.attempts,
            error=before.last_error,
        )
        return before

    async def _group_name(self, group_id: int) -> str | None:
        names = {group.id: group.name for group in await self.store.list_groups()}
        return names.get(group_id)

    # usage and the log

    async def usage(self, query: UsageQuery) -> UsageReport:
        groups = await self.store.list_groups()
        names = {group.id: group.name for group in groups}
        group_id = None
        if query.group is not None:
            group_id = next((gid for gid, name in names.items() if name == query.group), None)
            if group_id is None:
                raise NotFound(f"No group named '{query.group}'.", param="group")
        if not query.per_key:
            rows = await self.store.usage_rollups(
                query.since, query.end, group_id=group_id, model=query.model
            )
            return build_report(query, rows, names)
        rows = await self.store.key_usage_rollups(
            query.since, query.end, group_id=group_id, model=query.model
        )
        keys = {record.id: key_name(record) for record in await self.store.list_keys(group_id)}
        return build_report(query, rows, names, keys)

    async def call_content(
        self, request_id: str, opened: Callable[[StoredContent], dict[str, Any]]
    ) -> dict[str, Any] | None:
        """A call's kept content (``opened`` unseals it), or ``None`` when none is kept
        (its group's policy was ``off``, it expired, or it was dropped). Every view is
        audited (``content.view``) before it is shown: a view the audit log cannot record
        is refused with the store's error."""
        found = await self.store.find_content(request_id) if findable(request_id) else None
        if found is None:
            return None
        document = opened(found)
        await self.audit("content.view", request_id, group_id=found.group_id, policy=found.policy)
        return document

    async def audit_log(
        self, *, limit: int = 100, before_id: int | None = None, query: AuditQuery | None = None
    ) -> list[AuditEntry]:
        return await self.store.list_audit(limit=limit, before_id=before_id, query=query)


def _deletion_target(pending: PendingDeletion) -> str:
    return f"voice {pending.voice_id} ({pending.model}), deletion {pending.id}"


def _no_deletion(deletion_id: int) -> NotFound:
    return NotFound(
        f"No clone deletion {deletion_id} is still to do.",
        param="deletion_id",
        code="deletion_not_found",
    )
