"""``parley serve --demo``: the offline demo (``parley.local.demo``), run by the serve command.

The one module of the gateway that imports ``parley.local``: the demo is handed the
gateway's serving, store work, config reading and address check from here, so
``parley.local`` never imports the command line.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from parley.cli.context import with_store
from parley.cli.listen import CannotListen, check_listen
from parley.cli.serve import run_worker
from parley.local.demo.run import run_demo
from parley.settings import ConfigError, Settings, load_settings
from parley.telemetry.logs import configure_logging

DEMO_DIR = Path("parley-demo")


def _load(path: Path) -> Settings:
    try:
        return load_settings(path, os.environ)
    except ConfigError as error:  # a PARLEY_* override the demo's config cannot take
        raise SystemExit(f"parley: {error}") from None


def serve_demo(host: str | None, port: int | None) -> None:
    """Start the local engines and serve Parley in front of them (the ``local`` extra);
    ``PARLEY_*`` overrides apply as they do to ``parley serve``."""
    configure_logging()
    run_demo(
        DEMO_DIR.resolve(),
        (host, port),
        lambda raw, listening: run_worker(raw, reuse_port=False, on_listening=listening),
        with_store,
        _load,
        check=_check_listen,
    )


def _check_listen(host: str, port: int) -> None:
    try:
        check_listen(host, port, reuse_port=False)
    except CannotListen as error:
        raise click.ClickException(str(error)) from None
