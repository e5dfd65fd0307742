"""``parley groups …``: groups (tenants), their quotas, budgets and model access, from a
shell.

One command family of the admin CLI, next to ``cli/keys.py`` and ``cli/usage.py``; each
goes through ``AdminService`` (``cli/admin.py``, ``as_admin``), so the rules and the
audit log are the API's and the dashboard's.
"""

from __future__ import annotations

from typing import Any

import click

from parley.cli.admin import BUDGET, BUDGET_HELP, CLEAR, LIMIT, as_admin, model_names
from parley.domain.content import (
    CONTENT_POLICIES,
    DEFAULT_RETENTION_DAYS,
    MAX_RETENTION_DAYS,
    ContentLogging,
    ContentPolicy,
    content_policy,
)
from parley.domain.groups import Group, Quota
from parley.domain.pricing import nanos_to_usd, usd_to_nanos
from parley.store.base import GroupChanges


def _group_line(group: Group) -> str:
    models = ",".join(sorted(group.models)) if group.models is not None else "*"
    budget = f"${nanos_to_usd(group.budget_nanos):g}" if group.budget_nanos is not None else "-"
    rpm, tpm = group.quota.rpm or "-", group.quota.tpm or "-"
    line = f"{group.id}\t{group.name}\trpm={rpm}\ttpm={tpm}\tbudget={budget}\tmodels={models}"
    if group.content.on:
        line += f"\tcontent={group.content.policy}/{group.content.retention_days}d"
    return line + ("\tdisabled" if group.disabled_at is not None else "")


CONTENT_POLICY = click.Choice(CONTENT_POLICIES)
CONTENT_HELP = (
    "What is kept of the group's prompts and replies (docs/operations.md, Content "
    "logging); redacted and full need PARLEY_SECRET_KEYS where the gateway runs."
)
RETENTION = click.IntRange(1, MAX_RETENTION_DAYS)
RETENTION_HELP = "Days a call's kept content is kept."


@click.group()
def groups() -> None:
    """Groups (tenants): quotas, budgets, model access."""


@groups.command("create")
@click.argument("name")
@click.option("--rpm", type=click.IntRange(min=1), help="Requests per minute.")
@click.option("--tpm", type=click.IntRange(min=1), help="Tokens per minute.")
@click.option("--models", help="Comma-separated model names the group may use (default all).")
@click.option("--budget-usd", type=BUDGET, help=f"{BUDGET_HELP}; default none.")
@click.option("--content-policy", type=CONTENT_POLICY, default="off", help=CONTENT_HELP)
@click.option(
    "--content-retention-days", type=RETENTION, default=DEFAULT_RETENTION_DAYS, help=RETENTION_HELP
)
@click.pass_context
def create_group(
    ctx: click.Context,
    name: str,
    rpm: int | None,
    tpm: int | None,
    models: str | None,
    budget_usd: Any,
    content_policy: str,
    content_retention_days: int,
) -> None:
    """Create a group. NAME is 1 to 64 letters, digits, '.', '_' or '-', starting with a
    letter or a digit."""
    budget = usd_to_nanos(budget_usd) if budget_usd not in (None, CLEAR) else None
    content = ContentLogging(_policy(content_policy), content_retention_days)
    group = as_admin(
        ctx,
        lambda admin: admin.create_group(
            name,
            quota=Quota(rpm=rpm, tpm=tpm),
            models=model_names(models),
            budget_nanos=budget,
            content=content,
        ),
    )
    click.echo(_group_line(group))


@groups.command("update")
@click.argument("name")
@click.option("--rpm", type=LIMIT, help="Requests per minute, or 'none'.")
@click.option("--tpm", type=LIMIT, help="Tokens per minute, or 'none'.")
@click.option("--models", help="Comma-separated model names, or 'all'.")
@click.option("--budget-usd", type=BUDGET, help=f"{BUDGET_HELP}, or 'none'.")
@click.option("--content-policy", type=CONTENT_POLICY, help=CONTENT_HELP)
@click.option("--content-retention-days", type=RETENTION, help=RETENTION_HELP)
@click.pass_context
def update_group(
    ctx: click.Context,
    name: str,
    rpm: Any,
    tpm: Any,
    models: str | None,
    budget_usd: Any,
    content_policy: str | None,
    content_retention_days: int | None,
) -> None:
    """Change a group's limits, budget, model access or content policy."""
    changes = GroupChanges(
        rpm=int(rpm) if rpm not in (None, CLEAR) else None,
        tpm=int(tpm) if tpm not in (None, CLEAR) else None,
        models=model_names(models) if models is not None else None,
        budget_nanos=usd_to_nanos(budget_usd) if budget_usd not in (None, CLEAR) else None,
        clear_rpm=rpm == CLEAR,
        clear_tpm=tpm == CLEAR,
        clear_models=models is not None and model_names(models) is None,
        clear_budget=budget_usd == CLEAR,
        content_policy=_policy(content_policy) if content_policy is not None else None,
        content_retention_days=content_retention_days,
    )
    click.echo(_group_line(as_admin(ctx, lambda admin: admin.update_group(name, changes))))


def _policy(name: str) -> ContentPolicy:
    return content_policy(name)  # click's Choice has checked it


@groups.command("disable")
@click.argument("name")
@click.pass_context
def disable_group(ctx: click.Context, name: str) -> None:
    """Refuse the group's keys (403) until it is enabled again."""
    click.echo(_group_line(as_admin(ctx, lambda admin: admin.set_disabled(name, True))))


@groups.command("enable")
@click.argument("name")
@click.pass_context
def enable_group(ctx: click.Context, name: str) -> None:
    """Accept a disabled group's keys again."""
    click.echo(_group_line(as_admin(ctx, lambda admin: admin.set_disabled(name, False))))


@groups.command("list")
@click.pass_context
def list_groups(ctx: click.Context) -> None:
    """List groups."""
    for group in as_admin(ctx, lambda admin: admin.groups()):
        click.echo(_group_line(group))
