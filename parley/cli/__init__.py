"""The ``parley`` command: serve, db, groups, keys, usage, engine."""

from __future__ import annotations

import click

from parley.cli.admin import groups, keys, usage
from parley.cli.context import db
from parley.cli.engine import engine
from parley.cli.serve import serve


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


cli.add_command(serve)
cli.add_command(db)
cli.add_command(groups)
cli.add_command(keys)
cli.add_command(usage)
cli.add_command(engine)


def main() -> None:
    cli(prog_name="parley")
