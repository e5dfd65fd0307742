"""What every CLI command shares: loading settings, opening the store, clean failures.

The admin commands load settings with ``secrets=False`` (they use only the database, so a
channel's unset ``${API_KEY}`` does not stop them), and say on stderr which config file
and which database they used. SQLAlchemy and the store are imported when a command first
opens the store, so ``parley --help`` stays fast.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import click

from parley.settings import (
    ConfigError,
    Settings,
    anchored_database_url,
    config_file,
    load_settings,
)

if TYPE_CHECKING:
    from parley.store.base import Store

T = TypeVar("T")
CONFIG_USED = "parley.config_used"


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"parley: {message}", err=True)
    sys.exit(code)


def note(message: str) -> None:
    """One line for the operator on stderr (stdout stays for results)."""
    click.echo(f"parley: {message}", err=True)


def config_path_of(ctx: click.Context, config_path: str | None = None) -> Path | None:
    path = config_path or ctx.find_root().obj
    return Path(path) if path else None


def settings_from(
    ctx: click.Context, config_path: str | None = None, *, secrets: bool = False
) -> Settings:
    """The settings; ``secrets=True`` (``serve``) also needs every ``${NAME}`` set."""
    path = config_file(config_path_of(ctx, config_path), os.environ)
    ctx.meta[CONFIG_USED] = f"config {path}" if path is not None else "no config file"
    try:
        return load_settings(path, os.environ, secrets=secrets)
    except ConfigError as error:
        fail(str(error))


def safe_url(url: str) -> str:
    """The database URL with any password hidden."""
    from parley.store.plain import shown_sqlite_file

    shown = shown_sqlite_file(url)
    if shown is not None:  # a serving process on a SQLite file never loads SQLAlchemy
        return shown
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ValueError, SQLAlchemyError):
        return "<database url>"


def database_shown(url: str) -> str:
    """The database as the operator should read it: password hidden, SQLite path absolute
    (a relative one is opened from the current directory)."""
    return safe_url(anchored_database_url(url, Path.cwd()))


def with_store(
    settings: Settings,
    work: Callable[[Store], Awaitable[T]],
    *,
    announce: bool = True,
    migrate_apart: bool = True,
) -> T:
    """Open the store, migrate it, run ``work``, close it; a database failure is one line.

    ``announce`` says on stderr which database the command used. A database that is behind
    is upgraded by a short-lived child process (``store/migrate_apart.py``), so Alembic
    never loads in this one: a command's process may go on to serve (``parley serve``, the
    demo), and it costs one child once per database. ``migrate_apart=False`` upgrades in
    the foreground (``parley db upgrade``, which shows what went wrong).
    """
    from parley.store.base import StoreError, StoreFault, StoreUnavailable
    from parley.store.opening import open_store

    if announce:
        ctx = click.get_current_context(silent=True)
        source = ctx.meta.get(CONFIG_USED) if ctx is not None else None
        where = f" ({source})" if source else ""
        note(f"database {database_shown(settings.database.url)}{where}")

    async def run() -> T:
        store = await open_store(
            settings.database.url,
            pool_size=settings.database.pool_size,
            timeout_seconds=settings.database.timeout_seconds,
        )
        try:
            await store.migrate(apart=migrate_apart)
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except StoreUnavailable as error:
        fail(
            f"cannot use the database at {database_shown(settings.database.url)}: {error.reason}",
            1,
        )
    except StoreFault as error:
        shown = database_shown(settings.database.url)
        fail(f"the database at {shown} refused the query: {error.reason}", 1)
    except StoreError as error:
        fail(str(error), 1)


@click.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
@click.pass_context
def upgrade(ctx: click.Context) -> None:
    """Apply every pending migration."""
    settings = settings_from(ctx)

    async def nothing(store: Store) -> None:
        return None

    with_store(settings, nothing, migrate_apart=False)
    click.echo(f"database at {database_shown(settings.database.url)} is up to date")
