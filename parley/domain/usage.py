"""What one call consumed, and the record the meter writes for it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from parley.domain.value import value


@value
class Usage:
    """What one call consumed. ``prompt_tokens`` counts every input token, cached or not
    (OpenAI's convention): ``cached_tokens`` of them were read from the upstream's prompt
    cache and ``cache_write_tokens`` written to it, each priced on its own. Reasoning
    tokens are output: counted in ``completion_tokens``, and told apart for reports."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    characters: int = 0
    audio_ms: int = 0
    estimated: bool = False
    """True when the upstream reported nothing and Parley counted for itself."""
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@value
class UsageRecord:
    request_id: str
    """Unique per call; the store ignores a second record with the same id."""
    created_at: datetime
    group_id: int
    key_id: int
    model: str
    channel: str
    endpoint: str
    status: int
    latency_ms: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    characters: int = 0
    audio_ms: int = 0
    cost_nanos: int = 0
    estimated: bool = False
    cached_tokens: int = 0
    """Of ``prompt_tokens``, those read from the upstream's prompt cache."""
    cache_write_tokens: int = 0
    """Of ``prompt_tokens``, those written to it."""


@dataclass(frozen=True, slots=True)
class DailyUsage:
    """One row of the forever-kept rollup: a group's use of one model on one UTC day."""

    day: date
    model: str
    requests: int
    prompt_tokens: int
    completion_tokens: int
    characters: int
    audio_ms: int
    cost_nanos: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class GroupDailyUsage:
    """A rollup row with its group: the operator's view across groups."""

    group_id: int
    day: date
    model: str
    requests: int
    prompt_tokens: int
    completion_tokens: int
    characters: int
    audio_ms: int
    cost_nanos: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
