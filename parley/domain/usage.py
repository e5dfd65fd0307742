"""What one call consumed, and the record the meter writes for it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from parley.domain.value import value


@value
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    characters: int = 0
    audio_ms: int = 0
    estimated: bool = False
    """True when the upstream reported nothing and Parley counted for itself."""

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
    model_requested: str = ""
    """The model name the caller gave (an alias, a retired alias, an unknown name); empty
    when the request was refused before its model was read."""
    error_code: str | None = None
    """The error envelope's ``code`` of a failed or refused call."""
    first_byte_ms: int | None = None
    """When the caller's first byte was ready: a stream's first relayed read, a whole
    reply's answer; None when nothing was sent."""
    admitted: bool = True
    """False for a refusal (``pipeline/refusal.py``): a request-log line with no usage,
    never counted in the rollups."""


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
