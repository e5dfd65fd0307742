"""``parley keys …``: API keys from a shell: create (the secret shown once), list, edit,
rotate, revoke.

One command family of the admin CLI, next to ``cli/groups.py`` and ``cli/usage.py``;
each goes through ``AdminService`` (``cli/admin.py``, ``as_admin``), so the rules and
the audit log are the API's and the dashboard's, and ``edit`` and ``rotate`` take what
``PATCH /admin/keys/ID`` and ``POST /admin/keys/ID/rotate`` take.
"""

from __future__ import annotations

from typing import Any

import click

from parley.admin.fields import MAX_GRACE_SECONDS, budget_field, grace, key_changes
from parley.admin.service import AdminService
from parley.admin.views import KeyState
from parley.cli.admin import BUDGET, BUDGET_HELP, CLEAR, LIMIT, as_admin, cleared, model_names
from parley.cli.context import fail, note
from parley.domain.groups import Quota
from parley.domain.keys import KeyRecord
from parley.domain.pricing import nanos_to_usd
from parley.errors import ParleyError


@click.group()
def keys() -> None:
    """API keys: create (shown once), list, edit, rotate, revoke."""


@keys.command("create")
@click.option("--group", "group_name", required=True, help="The group the key belongs to.")
@click.option("--name", default="", help="A label for the key.")
@click.option("--expires-in-days", type=click.IntRange(min=1), help="Expire after N days.")
@click.option("--rpm", type=click.IntRange(min=1), help="Per-key requests per minute.")
@click.option("--tpm", type=click.IntRange(min=1), help="Per-key tokens per minute.")
@click.option("--models", help="Comma-separated models the key may use, within the group's.")
@click.option("--budget-usd", type=BUDGET, help=f"The key's own {BUDGET_HELP}.")
@click.pass_context
def create_key(
    ctx: click.Context,
    group_name: str,
    name: str,
    expires_in_days: int | None,
    rpm: int | None,
    tpm: int | None,
    models: str | None,
    budget_usd: Any,
) -> None:
    """Create a key and print it (the only time it is shown)."""
    try:
        budget = budget_field({"budget_usd": cleared(budget_usd)})
    except ParleyError as error:
        fail(error.message)
    state, secret = as_admin(
        ctx,
        lambda admin: admin.create_key(
            group_name,
            name=name,
            expires_in_days=expires_in_days,
            quota=Quota(rpm=rpm, tpm=tpm),
            models=model_names(models) if models is not None else None,
            budget_nanos=budget,
        ),
    )
    click.echo(secret)
    record = state.record
    click.echo(f"created key {record.id} ({record.prefix}…) for group {group_name!r}", err=True)


def _key_line(state: KeyState, names: dict[int, str]) -> str:
    record: KeyRecord = state.record
    expires = record.expires_at.isoformat(timespec="seconds") if record.expires_at else "-"
    used = state.last_used_at.isoformat(timespec="seconds") if state.last_used_at else "-"
    group = names.get(record.group_id, f"#{record.group_id}")
    fields = [str(record.id), f"{record.prefix}…", f"group={group}", state.status]
    return "\t".join([*fields, f"expires={expires}", f"last_used={used}", record.name])


async def _group_names(admin: AdminService) -> dict[int, str]:
    return {group.id: group.name for group in await admin.groups()}


@keys.command("list")
@click.option("--group", "group_name", help="Only this group's keys.")
@click.pass_context
def list_keys(ctx: click.Context, group_name: str | None) -> None:
    """List keys (never the secrets: only their prefixes), with their group's name."""

    async def work(admin: AdminService) -> list[str]:
        states = await admin.keys(group_name)
        names = await _group_names(admin)
        return [_key_line(state, names) for state in states]

    for line in as_admin(ctx, work):
        click.echo(line)


@keys.command("revoke")
@click.argument("key_id", type=int)
@click.pass_context
def revoke_key(ctx: click.Context, key_id: int) -> None:
    """Revoke a key by its id (see `parley keys list`)."""

    async def work(admin: AdminService) -> str:
        state = await admin.revoke_key(key_id)
        return _key_line(state, await _group_names(admin))

    click.echo(as_admin(ctx, work))


def _key_settings(record: KeyRecord) -> str:
    """A key's own limits on top of its group's (``-``: the group's alone)."""
    models = ",".join(sorted(record.models)) if record.models is not None else "*"
    budget = f"${nanos_to_usd(record.budget_nanos):g}" if record.budget_nanos is not None else "-"
    rpm, tpm = record.quota.rpm or "-", record.quota.tpm or "-"
    return f"rpm={rpm}\ttpm={tpm}\tbudget={budget}\tmodels={models}"


def _edit_body(
    name: str | None,
    rpm: Any,
    tpm: Any,
    models: str | None,
    budget_usd: Any,
    expires_in_days: int | None,
    expires_at: str | None,
) -> dict[str, Any]:
    """The body ``PATCH /admin/keys/{id}`` would take for these options (absent: unchanged)."""
    body: dict[str, Any] = {}
    if name is not None:
        body["name"] = name
    for field, value in (("rpm", rpm), ("tpm", tpm)):
        if value is not None:
            body[field] = None if value == CLEAR else int(value)
    if models is not None:
        chosen = model_names(models)
        body["models"] = sorted(chosen) if chosen is not None else None
    if budget_usd is not None:
        body["budget_usd"] = cleared(budget_usd)
    if expires_in_days is not None:
        body["expires_in_days"] = expires_in_days
    if expires_at is not None:
        body["expires_at"] = None if expires_at.lower() == CLEAR else expires_at
    return body


@keys.command("edit")
@click.argument("key_id", type=int)
@click.option("--name", help="A new label.")
@click.option("--rpm", type=LIMIT, help="Per-key requests per minute, or 'none' (the group's).")
@click.option("--tpm", type=LIMIT, help="Per-key tokens per minute, or 'none' (the group's).")
@click.option("--models", help="Comma-separated models, within the group's; or 'all'.")
@click.option("--budget-usd", type=BUDGET, help=f"The key's own {BUDGET_HELP}, or 'none'.")
@click.option("--expires-in-days", type=click.IntRange(min=1), help="Expire N days from now.")
@click.option("--expires-at", metavar="ISO|none", help="Expire then (UTC unless a zone is given).")
@click.pass_context
def edit_key(
    ctx: click.Context,
    key_id: int,
    name: str | None,
    rpm: Any,
    tpm: Any,
    models: str | None,
    budget_usd: Any,
    expires_in_days: int | None,
    expires_at: str | None,
) -> None:
    """Change a key's label, limits, models, budget or expiry, as PATCH /admin/keys/ID does.

    Its own limits, models and budget apply on top of its group's; 'none' removes one."""
    if expires_in_days is not None and expires_at is not None:
        fail("give --expires-in-days or --expires-at, not both")
    body = _edit_body(name, rpm, tpm, models, budget_usd, expires_in_days, expires_at)
    if not body:
        fail("nothing to change: give --name, --rpm, --tpm, --models, --budget-usd or an expiry")
    try:
        changes = key_changes(body)
    except ParleyError as error:
        fail(error.message)

    async def work(admin: AdminService) -> list[str]:
        state = await admin.update_key(key_id, changes)
        return [_key_line(state, await _group_names(admin)), _key_settings(state.record)]

    for line in as_admin(ctx, work):
        click.echo(line)


GRACE_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}


class GraceType(click.ParamType):  # type: ignore[type-arg]
    """A duration: seconds, or a number with ``s``, ``m``, ``h`` or ``d`` (``90m``, ``7d``)."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            return value
        text = str(value).strip().lower()
        unit = GRACE_UNITS.get(text[-1:], 0)
        number = text[:-1] if unit else text
        if not number.isdecimal():
            self.fail(f"{value!r} is not a duration such as 0, 90s, 30m, 24h or 7d", param, ctx)
        return int(number) * (unit or 1)


@keys.command("rotate")
@click.argument("key_id", type=int)
@click.option(
    "--grace",
    "grace_seconds",
    type=GraceType(),
    default="1h",
    show_default=True,
    help="How long the old secret keeps working (0: refused at once; at most 30d).",
)
@click.pass_context
def rotate_key(ctx: click.Context, key_id: int, grace_seconds: int) -> None:
    """Give a key a new secret and print it (the only time it is shown), as
    POST /admin/keys/ID/rotate does: same id, label, limits and usage."""
    if grace_seconds > MAX_GRACE_SECONDS:
        fail(f"--grace is at most 30d ({MAX_GRACE_SECONDS} seconds)")
    keep = grace({"grace_seconds": grace_seconds})
    state, secret = as_admin(ctx, lambda admin: admin.rotate_key(key_id, keep))
    click.echo(secret)
    record = state.record
    until = record.previous_until.isoformat(timespec="seconds") if record.previous_until else "-"
    note(f"rotated key {record.id} ({record.prefix}…); the old secret works until {until}")
