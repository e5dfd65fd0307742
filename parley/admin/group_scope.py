"""A group-admin's ``AdminService``: every view and change narrowed to one group.

``context.admin_service`` hands this to every handler a ``group-admin`` reaches, so a
list, a report or a form shows their group's things only, whatever its query or body
names: another group, or a key or a request-log line of another group, is *not found*
with the very words a thing that does not exist gets (never a 403 that would confirm
it exists). Changes a group-admin may not make (the group's limits, enabling it, voices,
the audit log) are refused here too, behind the route table's own refusal.

A group-admin's key stays within its group's limits: a rate, a budget or a model above
the group's is refused with what the group allows (``within_group``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from parley.admin.reports import UsageQuery, UsageReport
from parley.admin.service import AdminService, KeyReplayed, Unclone
from parley.admin.views import KeyState
from parley.domain.audit import Actor, AuditEntry, AuditQuery
from parley.domain.content import NO_CONTENT_LOGGING, ContentLogging
from parley.domain.groups import Group, Quota
from parley.domain.pricing import nanos_to_usd
from parley.domain.voices import Clone, Deleted
from parley.errors import InvalidRequest, NotFound, PermissionDenied
from parley.runtime.budget import SpendLedger
from parley.runtime.directory import Directory
from parley.store.base import AdminStore, GroupChanges, KeyChanges

ABOVE_GROUP = "above_group_limit"
NOT_YOURS = "A group administrator may not do this; an operator of the gateway may."


def _usd(nanos: int) -> str:
    return f"${nanos_to_usd(nanos):,.2f}"


def within_group(
    group: Group,
    *,
    rpm: int | None,
    tpm: int | None,
    models: frozenset[str] | None,
    budget_nanos: int | None,
) -> None:
    """Refuse a key's rate, budget or models above its group's (``None`` on the key means
    the group's own, always within it)."""
    for name, label, own, groups in (
        ("rpm", "requests per minute", rpm, group.quota.rpm),
        ("tpm", "tokens per minute", tpm, group.quota.tpm),
    ):
        if own is not None and groups is not None and own > groups:
            raise InvalidRequest(
                f"A key's {label} ({own:,}) may not be above its group's ({groups:,}): "
                f"set {groups:,} or less, or leave it empty for the group's.",
                param=name,
                code=ABOVE_GROUP,
            )
    limit = group.budget_nanos
    if budget_nanos is not None and limit is not None and budget_nanos > limit:
        raise InvalidRequest(
            f"A key's budget ({_usd(budget_nanos)}) may not be above its group's "
            f"({_usd(limit)} per period): set that or less, or leave it empty for the "
            "group's.",
            param="budget_usd",
            code=ABOVE_GROUP,
        )
    if models is not None and group.models is not None and not models <= group.models:
        outside = ", ".join(sorted(models - group.models))
        allowed = ", ".join(sorted(group.models)) or "none"
        raise InvalidRequest(
            f"The group may use only these models: {allowed}; not {outside}.",
            param="models",
            code=ABOVE_GROUP,
        )


class GroupAdminService(AdminService):
    """``AdminService`` as one group's administrator sees it (``scope``)."""

    def __init__(
        self,
        store: AdminStore,
        actor: Actor,
        group: Group,
        *,
        directory: Directory | None = None,
        ledger: SpendLedger | None = None,
        unclone: Unclone | None = None,
    ) -> None:
        super().__init__(store, actor, directory=directory, ledger=ledger, unclone=unclone)
        self.scope = group

    @property
    def own(self) -> Group:
        assert self.scope is not None
        return self.scope

    # groups: theirs alone, read only

    async def groups(self) -> list[Group]:
        return [await super().group(self.own.name)]

    async def group(self, name: str) -> Group:
        if name != self.own.name:
            raise NotFound(f"No group named '{name}'.", param="name")
        return await super().group(name)

    async def create_group(
        self,
        name: str,
        *,
        quota: Quota = Quota(),
        models: frozenset[str] | None = None,
        budget_nanos: int | None = None,
        content: ContentLogging = NO_CONTENT_LOGGING,
    ) -> Group:
        raise PermissionDenied(NOT_YOURS, code="insufficient_role")

    async def update_group(self, name: str, changes: GroupChanges) -> Group:
        raise PermissionDenied(NOT_YOURS, code="insufficient_role")

    async def set_disabled(self, name: str, disabled: bool) -> Group:
        raise PermissionDenied(NOT_YOURS, code="insufficient_role")

    # keys: their group's, within its limits

    async def keys(self, group_name: str | None = None) -> list[KeyState]:
        return await super().keys((await self.group(group_name or self.own.name)).name)

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
        if group_name != self.own.name:
            raise InvalidRequest(
                f"No group named '{group_name}'. The groups are: {self.own.name}.",
                param="group",
            )
        group = await self.group(group_name)
        within_group(group, rpm=quota.rpm, tpm=quota.tpm, models=models, budget_nanos=budget_nanos)
        try:
            return await super().create_key(
                group.name,
                name=name,
                expires_in_days=expires_in_days,
                quota=quota,
                models=models,
                budget_nanos=budget_nanos,
                idempotency_key=idempotency_key,
            )
        except KeyReplayed as replay:  # its words name the key: only if it is theirs
            if (await super().find_key(replay.key_id)).record.group_id == group.id:
                raise
            raise InvalidRequest(
                "This idempotency key is already used; send another.",
                param="idempotency_key",
            ) from None

    async def find_key(self, key_id: int) -> KeyState:
        state = await super().find_key(key_id)
        if state.record.group_id != self.own.id:
            raise NotFound(f"No key with id '{key_id}'.", param="key_id")
        return state

    async def revoke_key(self, key_id: int) -> KeyState:
        await self.find_key(key_id)
        return await super().revoke_key(key_id)

    async def update_key(self, key_id: int, changes: KeyChanges) -> KeyState:
        record = (await self.find_key(key_id)).record

        def after(clear: bool, new: Any, now: Any) -> Any:
            return None if clear else new if new is not None else now

        within_group(
            await self.group(self.own.name),
            rpm=after(changes.clear_rpm, changes.rpm, record.quota.rpm),
            tpm=after(changes.clear_tpm, changes.tpm, record.quota.tpm),
            models=after(changes.clear_models, changes.models, record.models),
            budget_nanos=after(changes.clear_budget, changes.budget_nanos, record.budget_nanos),
        )
        return await super().update_key(key_id, changes)

    async def rotate_key(self, key_id: int, grace: timedelta) -> tuple[KeyState, str]:
        await self.find_key(key_id)
        return await super().rotate_key(key_id, grace)

    # usage and what else there is

    async def usage(self, query: UsageQuery) -> UsageReport:
        group = await self.group(query.group or self.own.name)
        return await super().usage(replace(query, group=group.name))

    async def clones(self, group_name: str | None = None, model: str | None = None) -> list[Clone]:
        return await super().clones((await self.group(group_name or self.own.name)).name, model)

    async def delete_clone(self, model: str, voice_id: str) -> Deleted:
        raise PermissionDenied(NOT_YOURS, code="insufficient_role")

    async def audit_log(
        self, *, limit: int = 100, before_id: int | None = None, query: AuditQuery | None = None
    ) -> list[AuditEntry]:
        raise PermissionDenied(NOT_YOURS, code="insufficient_role")
