"""``parley groups …``, ``parley keys …`` and ``parley usage …``: the store, from a shell."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click

from parley.cli.context import fail, settings_from, with_store
from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord, digest, display_prefix, new_key
from parley.domain.pricing import nanos_to_usd, usd_to_nanos
from parley.store.base import Conflict, GroupChanges, Missing, Store

CLEAR = "none"


class LimitType(click.ParamType):  # type: ignore[type-arg]
    """A positive number, or ``none`` to remove the limit."""

    name = "N|none"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or str(value).lower() == CLEAR:
            return CLEAR
        try:
            number = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number or 'none'", param, ctx)
        if number <= 0:
            self.fail(f"{value!r} must be greater than zero", param, ctx)
        return number


LIMIT = LimitType()


def _models(value: str | None) -> frozenset[str] | None:
    if value is None or value.lower() in (CLEAR, "all", "*"):
        return None
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def _group_line(group: Group) -> str:
    models = ",".join(sorted(group.models)) if group.models is not None else "*"
    budget = f"${nanos_to_usd(group.budget_nanos):g}" if group.budget_nanos is not None else "-"
    rpm, tpm = group.quota.rpm or "-", group.quota.tpm or "-"
    return f"{group.id}\t{group.name}\trpm={rpm}\ttpm={tpm}\tbudget={budget}\tmodels={models}"


@click.group()
def groups() -> None:
    """Groups (tenants): quotas, budgets, model access."""


@groups.command("create")
@click.argument("name")
@click.option("--rpm", type=click.IntRange(min=1), help="Requests per minute.")
@click.option("--tpm", type=click.IntRange(min=1), help="Tokens per minute.")
@click.option("--models", help="Comma-separated model names the group may use (default all).")
@click.option("--budget-usd", type=click.FloatRange(min=0), help="Spend limit per budget period.")
@click.pass_context
def create_group(
    ctx: click.Context,
    name: str,
    rpm: int | None,
    tpm: int | None,
    models: str | None,
    budget_usd: float | None,
) -> None:
    """Create a group."""
    budget = usd_to_nanos(budget_usd) if budget_usd is not None else None

    async def work(store: Store) -> Group:
        try:
            return await store.create_group(
                name, quota=Quota(rpm=rpm, tpm=tpm), models=_models(models), budget_nanos=budget
            )
        except Conflict:
            fail(f"a group named {name!r} already exists")

    click.echo(_group_line(with_store(settings_from(ctx), work)))


@groups.command("update")
@click.argument("name")
@click.option("--rpm", type=LIMIT, help="Requests per minute, or 'none'.")
@click.option("--tpm", type=LIMIT, help="Tokens per minute, or 'none'.")
@click.option("--models", help="Comma-separated model names, or 'all'.")
@click.option("--budget-usd", type=LIMIT, help="Spend limit per period in USD, or 'none'.")
@click.pass_context
def update_group(
    ctx: click.Context, name: str, rpm: Any, tpm: Any, models: str | None, budget_usd: Any
) -> None:
    """Change a group's limits, budget or model access."""
    changes = GroupChanges(
        rpm=int(rpm) if rpm not in (None, CLEAR) else None,
        tpm=int(tpm) if tpm not in (None, CLEAR) else None,
        models=_models(models) if models is not None else None,
        budget_nanos=usd_to_nanos(budget_usd) if budget_usd not in (None, CLEAR) else None,
        clear_rpm=rpm == CLEAR,
        clear_tpm=tpm == CLEAR,
        clear_models=models is not None and _models(models) is None,
        clear_budget=budget_usd == CLEAR,
    )

    async def work(store: Store) -> Group:
        try:
            return await store.update_group(name, changes)
        except Missing:
            fail(f"no group named {name!r}")

    click.echo(_group_line(with_store(settings_from(ctx), work)))


@groups.command("list")
@click.pass_context
def list_groups(ctx: click.Context) -> None:
    """List groups."""
    for group in with_store(settings_from(ctx), lambda store: store.list_groups()):
        click.echo(_group_line(group))


@click.group()
def keys() -> None:
    """API keys: create (shown once), list, revoke."""


@keys.command("create")
@click.option("--group", "group_name", required=True, help="The group the key belongs to.")
@click.option("--name", default="", help="A label for the key.")
@click.option("--expires-in-days", type=click.IntRange(min=1), help="Expire after N days.")
@click.option("--rpm", type=click.IntRange(min=1), help="Per-key requests per minute.")
@click.option("--tpm", type=click.IntRange(min=1), help="Per-key tokens per minute.")
@click.pass_context
def create_key(
    ctx: click.Context,
    group_name: str,
    name: str,
    expires_in_days: int | None,
    rpm: int | None,
    tpm: int | None,
) -> None:
    """Create a key and print it (the only time it is shown)."""
    secret = new_key()
    expires = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None

    async def work(store: Store) -> KeyRecord:
        group = await store.get_group(group_name)
        if group is None:
            fail(await unknown_group(store, group_name))
        return await store.create_key(
            group.id,
            name=name,
            digest=digest(secret),
            prefix=display_prefix(secret),
            expires_at=expires,
            quota=Quota(rpm=rpm, tpm=tpm),
        )

    record = with_store(settings_from(ctx), work)
    click.echo(secret)
    click.echo(f"created key {record.id} ({record.prefix}…) for group {group_name!r}", err=True)


async def unknown_group(store: Store, name: str) -> str:
    """Why ``name`` is refused, with the groups that do exist."""
    names = sorted(group.name for group in await store.list_groups())
    if not names:
        return f"no group named {name!r}: there are no groups yet (parley groups create NAME)"
    return f"no group named {name!r}; the groups are: {', '.join(names)}"


def _key_line(record: KeyRecord) -> str:
    state = "revoked" if record.revoked_at else "active"
    if record.revoked_at is None and not record.usable_at(datetime.now(UTC)):
        state = "expired"
    expires = record.expires_at.isoformat(timespec="seconds") if record.expires_at else "-"
    fields = [str(record.id), f"{record.prefix}…", f"group={record.group_id}", state]
    return "\t".join([*fields, f"expires={expires}", record.name])


@keys.command("list")
@click.option("--group", "group_name", help="Only this group's keys.")
@click.pass_context
def list_keys(ctx: click.Context, group_name: str | None) -> None:
    """List keys (never the secrets: only their prefixes)."""

    async def work(store: Store) -> list[KeyRecord]:
        if group_name is None:
            return await store.list_keys()
        group = await store.get_group(group_name)
        if group is None:
            fail(await unknown_group(store, group_name))
        return await store.list_keys(group.id)

    for record in with_store(settings_from(ctx), work):
        click.echo(_key_line(record))


@keys.command("revoke")
@click.argument("key_id", type=int)
@click.pass_context
def revoke_key(ctx: click.Context, key_id: int) -> None:
    """Revoke a key by its id (see `parley keys list`)."""

    async def work(store: Store) -> KeyRecord:
        try:
            return await store.revoke_key(key_id, datetime.now(UTC))
        except Missing:
            fail(f"no key with id {key_id}")

    click.echo(_key_line(with_store(settings_from(ctx), work)))


@click.group()
def usage() -> None:
    """Usage records."""


@usage.command("prune")
@click.option(
    "--older-than-days", type=click.IntRange(min=1), help="Default: usage.retention_days."
)
@click.pass_context
def prune(ctx: click.Context, older_than_days: int | None) -> None:
    """Delete raw usage records past retention (daily rollups are kept)."""
    settings = settings_from(ctx)
    days = older_than_days or settings.usage.retention_days
    before = datetime.now(UTC) - timedelta(days=days)
    count = with_store(settings, lambda store: store.prune_usage(before))
    click.echo(f"pruned {count} usage records older than {days} days")
