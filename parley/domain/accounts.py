"""Named administrators and their roles.

* ``owner``: everything, administrators included.
* ``operator``: tenants (groups), keys, channels and voices; not administrators.
* ``viewer``: reads every page and list; changes nothing.

The admin token acts as an owner (automation); the CLI too (it has the database).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Role = Literal["viewer", "operator", "owner"]
ROLES: tuple[Role, ...] = ("viewer", "operator", "owner")
"""From the least to the most allowed."""
ACCOUNT_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
ACCOUNT_NAME_RULE = (
    "1 to 64 characters: lower-case letters, digits, '.', '_' and '-', "
    "starting with a letter or a digit"
)
MIN_PASSWORD = 12
MAX_PASSWORD = 1024


def allows(role: Role, needed: Role) -> bool:
    """Whether ``role`` may do what ``needed`` may."""
    return ROLES.index(role) >= ROLES.index(needed)


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    role: Role
    password_hash: str
    created_at: datetime
    updated_at: datetime
    disabled_at: datetime | None = None
    id: int | None = None
    sso_subject: str | None = None
    """``<issuer> <sub>``: the single sign-on identity the account is bound to."""

    @property
    def sso_only(self) -> bool:
        """Made for single sign-on: no password signs it in."""
        return not self.password_hash
