"""``parley voices list``: every group's cloned voices, from a shell, through ``AdminService``.

Deleting a voice needs its engine, which only a running gateway reaches: use
``DELETE /admin/voices/{model}/{voice_id}`` or the dashboard's Voices page.
"""

from __future__ import annotations

import click

from parley.admin.service import AdminService
from parley.cli.admin import as_admin
from parley.domain.voices import Clone


@click.group()
def voices() -> None:
    """Cloned voices (delete them through the admin API or the dashboard)."""


def _clone_line(clone: Clone, names: dict[int, str]) -> str:
    group = names.get(clone.group_id, f"#{clone.group_id}")
    seconds = clone.duration_ms / 1000
    created = clone.created_at.isoformat(timespec="seconds")
    return f"{group}\t{clone.model}\t{clone.voice_id}\t{clone.label}\t{created}\t{seconds:.1f}s"


@voices.command("list")
@click.option("--group", "group_name", help="Only this group's voices.")
@click.option("--model", help="Only this model's voices.")
@click.pass_context
def list_voices(ctx: click.Context, group_name: str | None, model: str | None) -> None:
    """List cloned voices: group, model, voice id, label, created, clip duration."""

    async def work(admin: AdminService) -> list[str]:
        clones = await admin.clones(group_name, model)
        names = {group.id: group.name for group in await admin.groups()}
        return [_clone_line(clone, names) for clone in clones]

    for line in as_admin(ctx, work):
        click.echo(line)
