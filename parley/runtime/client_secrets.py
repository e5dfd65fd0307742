"""The book of realtime client secrets: made here, kept by digest in memory and in the
store, found again when a browser opens a realtime session with one.

A secret made on one worker may open a session on another: a digest this process does
not hold is looked up in the store, within a budget of look-ups a second (as unknown keys
are, ``runtime.directory``), so a flood of made-up secrets never reaches the database
unbounded. Expired secrets are forgotten (in memory at once, in the store at most once a
minute, when a new one is made).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from parley.domain.client_secrets import ClientSecret, looks_like_client_secret, new_client_secret
from parley.domain.keys import digest, same_digest
from parley.runtime.directory import LookupBudget
from parley.store.base import ClientSecretStore

PRUNE_SECONDS = 60.0
LOOKUPS_PER_SECOND = 20.0
MOST_KEPT = 100_000
"""The most secrets held in memory; past it the oldest go (the store still has them)."""


class ClientSecrets:
    def __init__(
        self,
        store: ClientSecretStore,
        *,
        clock: Callable[[], float] = time.monotonic,
        lookups_per_second: float = LOOKUPS_PER_SECOND,
    ) -> None:
        self._store = store
        self._kept: dict[str, ClientSecret] = {}
        self._clock = clock
        self._budget = LookupBudget(lookups_per_second, clock())
        self._pruned = clock()

    async def issue(
        self,
        key_id: int,
        group_id: int,
        seconds: int,
        *,
        model: str | None,
        session: dict[str, Any] | None,
    ) -> tuple[str, ClientSecret]:
        """A new secret (its only plain copy, returned) and its record, kept."""
        value = new_client_secret()
        now = datetime.now(UTC)
        secret = ClientSecret(
            digest(value), key_id, group_id, model, session, now, now + timedelta(seconds=seconds)
        )
        await self._prune(now)
        await self._store.add_client_secret(secret)
        self._keep(secret)
        return value, secret

    async def find(self, value: str) -> ClientSecret | None:
        """The usable secret ``value`` is (``None``: none, or expired)."""
        if not looks_like_client_secret(value):
            return None
        wanted = digest(value)
        secret = self._kept.get(wanted)
        if secret is None:
            if not self._budget.take(self._clock()):
                return None
            secret = await self._store.find_client_secret(wanted)
            if secret is None:
                return None
            self._keep(secret)
        if not same_digest(secret.digest, wanted) or not secret.usable_at(datetime.now(UTC)):
            return None
        return secret

    def _keep(self, secret: ClientSecret) -> None:
        self._kept[secret.digest] = secret
        if len(self._kept) > MOST_KEPT:
            del self._kept[next(iter(self._kept))]

    async def _prune(self, now: datetime) -> None:
        if self._clock() - self._pruned < PRUNE_SECONDS:
            return
        self._pruned = self._clock()
        self._kept = {d: s for d, s in self._kept.items() if s.usable_at(now)}
        await self._store.prune_client_secrets(now)
