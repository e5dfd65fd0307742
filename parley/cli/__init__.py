"""The ``parley`` command: serve, db, groups, keys, usage, engine, admin, channels.

Each command's module is imported only when that command runs: ``parley --help`` loads
Click alone, an admin command loads the settings and the store but not the web server,
and only ``serve`` loads aiohttp and the gateway.
"""

from __future__ import annotations

import importlib

import click

LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("parley.cli.serve_command:serve", "Serve the /v1 API."),
    "db": ("parley.cli.context:db", "Database schema."),
    "groups": ("parley.cli.groups:groups", "Groups (tenants): quotas, budgets, model access."),
    "keys": ("parley.cli.keys:keys", "API keys: create (shown once), list, edit, rotate, revoke."),
    "usage": ("parley.cli.usage:usage", "Usage records."),
    "voices": ("parley.cli.voices:voices", "Cloned voices: list every group's."),
    "engine": ("parley.local.engine.command:engine", "The local speech and transcription engine."),
    "admin": ("parley.cli.accounts:admin", "Administrator accounts and their roles."),
    "channels": ("parley.cli.accounts:channels", "Stored channels: list, new-key, reseal."),
}
"""Command name → (``module:attribute``, the one-line help ``parley --help`` shows)."""


class LazyGroup(click.Group):
    """A group whose subcommands are imported when used, not when listed."""

    def __init__(self, *args: object, lazy: dict[str, tuple[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in self._lazy:
            return command
        module_name, _, attribute = self._lazy[cmd_name][0].partition(":")
        loaded = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(loaded, click.Command):
            raise TypeError(f"{module_name}:{attribute} is not a click command")
        self.add_command(loaded, cmd_name)
        return loaded

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the declared one-line helps, importing nothing."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(formatter.width)))
            else:
                rows.append((name, self._lazy[name][1]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    lazy=LAZY_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file (default ./parley.yaml or $PARLEY_CONFIG).",
)
@click.version_option(package_name="parley")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Parley: an OpenAI-compatible AI gateway."""
    ctx.obj = config_path


def main() -> None:
    cli(prog_name="parley")
