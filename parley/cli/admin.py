"""What the admin commands share: ``as_admin`` (the admin service on the configured
store, a refusal as one line) and the options' types for limits, budgets and model
lists.

It stands apart so that each command family is a module of its own: ``parley groups …``
(``cli/groups.py``), ``parley keys …`` (``cli/keys.py``) and ``parley usage …``
(``cli/usage.py``); ``cli/accounts.py`` and ``cli/voices.py`` use ``as_admin`` too.
Going through ``AdminService``, as the admin API and the dashboard do, the commands keep
their rules (group names, budgets) and audit log (actor ``cli``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from parley.admin.service import AdminService
from parley.cli.context import fail, settings_from, with_store
from parley.domain.audit import Actor
from parley.errors import ParleyError
from parley.store.base import AdminStore

CLEAR = "none"
T = TypeVar("T")


def as_admin(ctx: click.Context, work: Callable[[AdminService], Awaitable[T]]) -> T:
    """Run ``work`` with the admin service on the configured store; a refusal is one line."""
    settings = settings_from(ctx)

    async def run(store: AdminStore) -> T:
        service = AdminService(store, Actor("cli", "local"), period=settings.limits.budget_period)
        try:
            return await work(service)
        except ParleyError as error:
            fail(error.message)

    return with_store(settings, run)


class LimitType(click.ParamType):  # type: ignore[type-arg]
    """A positive number (or, with ``zero_ok``, zero), or ``none`` to remove the limit."""

    name = "N|none"

    def __init__(self, *, zero_ok: bool = False) -> None:
        self.zero_ok = zero_ok

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or str(value).lower() == CLEAR:
            return CLEAR
        try:
            number = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number or 'none'", param, ctx)
        if number < 0 or (number == 0 and not self.zero_ok):
            floor = "zero or more" if self.zero_ok else "greater than zero"
            self.fail(f"{value!r} must be {floor}", param, ctx)
        return number


LIMIT = LimitType()
BUDGET = LimitType(zero_ok=True)
BUDGET_HELP = "Spend limit per budget period in USD (0 blocks every call)"


def model_names(value: str | None) -> frozenset[str] | None:
    """A ``--models`` option's names; ``None`` (every model) for ``none``, ``all`` or ``*``."""
    if value is None or value.lower() in (CLEAR, "all", "*"):
        return None
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def cleared(value: Any) -> Any:
    """An option's value in the admin API's body: ``none`` is null (back to the group's)."""
    return None if value == CLEAR else value
