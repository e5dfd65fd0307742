"""What every CLI command shares: loading settings, opening the store, clean failures."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import click
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from parley.settings import ConfigError, Settings, load_settings
from parley.store.base import Store, StoreError, StoreUnavailable
from parley.store.sql import open_store

T = TypeVar("T")


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"parley: {message}", err=True)
    sys.exit(code)


def settings_from(ctx: click.Context, config_path: str | None = None) -> Settings:
    path = config_path or ctx.find_root().obj
    try:
        return load_settings(Path(path) if path else None, os.environ)
    except ConfigError as error:
        fail(str(error))


def safe_url(url: str) -> str:
    """The database URL with any password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ValueError, SQLAlchemyError):
        return "<database url>"


def with_store(settings: Settings, work: Callable[[Store], Awaitable[T]]) -> T:
    """Open the store, migrate it, run ``work``, close it; a database failure is one line."""

    async def run() -> T:
        store = await open_store(
            settings.database.url,
            pool_size=settings.database.pool_size,
            timeout_seconds=settings.database.timeout_seconds,
        )
        try:
            await store.migrate()
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except StoreUnavailable as error:
        fail(f"cannot use the database at {safe_url(settings.database.url)}: {error.reason}", 1)
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

    with_store(settings, nothing)
    click.echo(f"database at {safe_url(settings.database.url)} is up to date")
