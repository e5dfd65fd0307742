"""``parley usage …``: usage reports from the daily rollups, and pruning the raw records
past retention, from a shell.

One command family of the admin CLI, next to ``cli/groups.py`` and ``cli/keys.py``;
reports go through ``AdminService`` (``cli/admin.py``, ``as_admin``), as the admin
API's do.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import click

from parley.admin.reports import parse_query, table
from parley.cli.admin import as_admin
from parley.cli.context import fail, settings_from, with_store
from parley.errors import ParleyError


@click.group()
def usage() -> None:
    """Usage records and reports."""


@usage.command("report")
@click.option("--group", help="Only this group.")
@click.option("--model", help="Only this model.")
@click.option("--since", metavar="YYYY-MM-DD", help="First day (default: the 1st of this month).")
@click.option("--until", metavar="YYYY-MM-DD", help="Last day, included (default: today).")
@click.option("--by", default="group,model", show_default=True, help="Rows per day, group, model.")
@click.option(
    "--format",
    "output",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@click.pass_context
def report(
    ctx: click.Context,
    group: str | None,
    model: str | None,
    since: str | None,
    until: str | None,
    by: str,
    output: str,
) -> None:
    """Usage across groups from the daily rollups (UTC days)."""
    try:
        query = parse_query(since=since, until=until, group=group, model=model, by=by)
    except ParleyError as error:
        fail(error.message)
    result = as_admin(ctx, lambda admin: admin.usage(query))
    if output == "json":
        click.echo(json.dumps(result.view(), indent=2))
    elif output == "csv":
        click.echo(result.csv(), nl=False)
    else:
        click.echo(table(result))


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
