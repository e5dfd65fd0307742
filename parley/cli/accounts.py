"""``parley admin …``: administrator accounts from a shell, and ``parley channels …``:
the channels kept in the database, a new secret key, and sealing every credential again
after a key rotation.

Accounts go through ``admin.accounts.Accounts`` (the API's and the dashboard's rules,
audited as ``cli``). A password is asked for without echo, or read from the first line
of standard input with ``--password-stdin``; it is never an argument (which ``ps``
and shell histories would show).
"""

from __future__ import annotations

import sys

import click

from parley.admin.accounts import Accounts
from parley.admin.passwords import Hasher
from parley.admin.service import AdminService
from parley.cli.admin import as_admin
from parley.cli.context import fail, settings_from, with_store
from parley.credentials import CredentialBox, SealError, new_key
from parley.domain.accounts import ROLES, Account
from parley.domain.audit import Actor
from parley.runtime.channel_book import reseal_all
from parley.store.base import ChannelStore, Store

ROLE = click.Choice(ROLES)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    entered: str = click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
    return entered


def _line(account: Account) -> str:
    status = "disabled" if account.disabled_at is not None else "active"
    return f"{account.name}\t{account.role}\t{status}\t{account.created_at:%Y-%m-%d}"


def _accounts(admin: AdminService) -> Accounts:
    return Accounts(admin, Hasher())


@click.group()
def admin() -> None:
    """Administrator accounts: create, list, set-role, password, disable, enable, delete."""


@admin.command("create")
@click.argument("name")
@click.option("--role", type=ROLE, required=True, help="owner, operator or viewer.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--sso", is_flag=True, help="No password: signs in with single sign-on only.")
@click.pass_context
def create(ctx: click.Context, name: str, role: str, password_stdin: bool, sso: bool) -> None:
    """Create an account NAME (lower-case letters, digits, '.', '_', '-')."""
    password = None if sso else _password(password_stdin)
    account = as_admin(ctx, lambda a: _accounts(a).create(name, role, password, sso=sso))
    click.echo(_line(account))


@admin.command("list")
@click.pass_context
def list_accounts(ctx: click.Context) -> None:
    """Every account: name, role, status, created."""
    for account in as_admin(ctx, lambda a: _accounts(a).list()):
        click.echo(_line(account))


@admin.command("set-role")
@click.argument("name")
@click.argument("role", type=ROLE)
@click.pass_context
def set_role(ctx: click.Context, name: str, role: str) -> None:
    """Give account NAME another role."""
    click.echo(_line(as_admin(ctx, lambda a: _accounts(a).update(name, role=role))))


@admin.command("password")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.pass_context
def password(ctx: click.Context, name: str, password_stdin: bool) -> None:
    """Set a new password for account NAME."""
    new = _password(password_stdin)
    click.echo(_line(as_admin(ctx, lambda a: _accounts(a).update(name, password=new))))


@admin.command("disable")
@click.argument("name")
@click.pass_context
def disable(ctx: click.Context, name: str) -> None:
    """Refuse account NAME's sign-ins and sessions (kept for the audit log)."""
    click.echo(_line(as_admin(ctx, lambda a: _accounts(a).update(name, disabled=True))))


@admin.command("enable")
@click.argument("name")
@click.pass_context
def enable(ctx: click.Context, name: str) -> None:
    click.echo(_line(as_admin(ctx, lambda a: _accounts(a).update(name, disabled=False))))


@admin.command("delete")
@click.argument("name")
@click.pass_context
def delete(ctx: click.Context, name: str) -> None:
    as_admin(ctx, lambda a: _accounts(a).delete(name))
    click.echo(f"deleted {name}")


@click.group()
def channels() -> None:
    """Channels kept in the database: list, new-key, reseal."""


@channels.command("list")
@click.pass_context
def list_channels(ctx: click.Context) -> None:
    """The stored channels (the config file's are in the file): name, type, URL, state."""

    async def run(store: ChannelStore) -> None:
        for channel in await store.list_channels():
            state = "disabled" if channel.disabled_at is not None else "enabled"
            spec = channel.spec
            click.echo(f"{channel.name}\t{spec['type']}\t{spec['base_url']}\t{state}")

    with_store(settings_from(ctx), run)


@channels.command("new-key")
def new_secret_key() -> None:
    """Print a new secret key for PARLEY_SECRET_KEYS (put it first to rotate)."""
    click.echo(new_key())


@channels.command("reseal")
@click.pass_context
def reseal(ctx: click.Context) -> None:
    """Seal every stored credential with the first of PARLEY_SECRET_KEYS."""
    settings = settings_from(ctx)
    try:
        box = CredentialBox(settings.admin.secret_keys)
    except SealError as error:
        fail(str(error))
    if not box.ready:
        fail("no secret key is configured: set PARLEY_SECRET_KEYS")

    async def run(store: Store) -> int:
        try:
            count = await reseal_all(store, box)
        except SealError as error:
            fail(str(error))
        await AdminService(store, Actor("cli", "local")).audit(
            "channel.reseal", "channels", channels=count
        )
        return count

    click.echo(f"resealed {with_store(settings, run)} channel credentials")
