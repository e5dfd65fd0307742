"""Models kept in the database, managed from the admin surface beside the config
file's: what the model is (its settings as the config file writes them), which channels
serve it, its prices now and a price change scheduled for a stated instant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class StoredModel:
    """``spec``: the model's settings but its name and prices (``kind``, ``aliases``,
    ``retired_aliases``, ``context_window``, ``vision``, ``owned_by``) and ``channels``,
    a list of ``{"channel", "upstream"}``; ``prices`` and ``next_prices``: the fields of
    the config file's ``prices``, USD as decimal strings. ``next_prices`` replace
    ``prices`` from ``next_prices_from`` on."""

    name: str
    spec: dict[str, Any]
    prices: dict[str, Any]
    prices_from: datetime
    next_prices: dict[str, Any] | None
    next_prices_from: datetime | None
    enabled: bool
    created_at: datetime
    updated_at: datetime
    id: int | None = None

    def settled(self, now: datetime) -> StoredModel:
        """The model with a scheduled change that is due by ``now`` made its price."""
        if self.next_prices is None or self.next_prices_from is None:
            return self
        if now < self.next_prices_from:
            return self
        return StoredModel(
            self.name,
            self.spec,
            self.next_prices,
            self.next_prices_from,
            None,
            None,
            self.enabled,
            self.created_at,
            self.updated_at,
            self.id,
        )
