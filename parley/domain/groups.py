"""Groups (tenants) and their quotas."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from parley.domain.content import NO_CONTENT_LOGGING, ContentLogging


@dataclass(frozen=True, slots=True)
class Quota:
    """Per-minute rates. ``None`` means unlimited."""

    rpm: int | None = None
    tpm: int | None = None


@dataclass(frozen=True, slots=True)
class Group:
    id: int
    name: str
    quota: Quota = Quota()
    models: frozenset[str] | None = None
    """Public model names the group may use; ``None`` means every model."""
    budget_nanos: int | None = None
    """Spend limit per budget period in nano-dollars; ``None`` means no limit."""
    created_at: datetime | None = field(default=None, compare=False)
    disabled_at: datetime | None = None
    """Set when an operator disabled the group: its keys are refused until it is enabled."""
    content: ContentLogging = NO_CONTENT_LOGGING
    """What of its calls' prompts and replies is kept (``domain/content.py``)."""

    def may_use(self, model: str) -> bool:
        return self.models is None or model in self.models
