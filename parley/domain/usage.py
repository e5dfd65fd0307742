"""What one call consumed, the most it may consume, and the record the meter writes.

An upstream's own count becomes a ``Usage`` only through ``reported_usage``, which refuses
what cannot be a count (negative, fractional, not a number): such a report is ignored,
logged, and the call falls back to Parley's estimate. What a call is billed is then capped
by its ``Allowance``, so neither an upstream's report nor Parley's estimate can exceed what
the call allowed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from parley.domain.value import value

log = logging.getLogger("parley.usage")


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
class Allowance:
    """The most a call may consume, known at admission: what its budget hold is priced
    from, and the cap on what it is billed.

    ``open_ended`` marks a call whose output nothing bounds (no ``max_tokens`` and a model
    without a context window): ``completion_tokens`` is then only what is held, not a cap.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    characters: int = 0
    audio_ms: int = 0
    open_ended: bool = False

    def cap(self, usage: Usage) -> Usage:
        """``usage`` within the allowance (the same object when it already is)."""
        if (
            usage.prompt_tokens <= self.prompt_tokens
            and (self.open_ended or usage.completion_tokens <= self.completion_tokens)
            and usage.characters <= self.characters
            and usage.audio_ms <= self.audio_ms
        ):
            return usage
        completion = usage.completion_tokens
        if not self.open_ended:
            completion = min(completion, self.completion_tokens)
        prompt = min(usage.prompt_tokens, self.prompt_tokens)
        cached = min(usage.cached_tokens, prompt)
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            characters=min(usage.characters, self.characters),
            audio_ms=min(usage.audio_ms, self.audio_ms),
            estimated=usage.estimated,
            cached_tokens=cached,
            cache_write_tokens=min(usage.cache_write_tokens, prompt - cached),
            reasoning_tokens=min(usage.reasoning_tokens, completion),
        )


NOTHING = Allowance()
"""The allowance of a call that consumes nothing billable (voice clones and deletes)."""


def reported_usage(
    reported: Any,
    *,
    source: str,
    prompt: str = "prompt_tokens",
    completion: str | None = "completion_tokens",
) -> Usage | None:
    """The usage an upstream reported, or ``None`` when it reported none or nothing valid.

    ``reported`` is the upstream's usage object; ``prompt`` and ``completion`` name its
    counts (``completion=None`` when the operation has no output count, as embeddings).
    A count is valid when it is a non-negative integer; a report with an invalid count is
    ignored whole and logged (``source`` says whose it was), and the caller estimates.
    """
    if not isinstance(reported, dict):  # a JSON object, as parsed
        return None
    prompt_count = reported.get(prompt)
    completion_count = reported.get(completion) if completion is not None else 0
    if (
        type(prompt_count) is int
        and prompt_count >= 0
        and type(completion_count) is int
        and completion_count >= 0
    ):
        return Usage(prompt_count, completion_count)
    if prompt_count is None and completion_count is None:
        return None
    log.warning(
        "ignored the usage %s reported (%s=%.40r, %s=%.40r): not a count; Parley's estimate "
        "is billed instead",
        source,
        prompt,
        prompt_count,
        completion,
        completion_count,
    )
    return None


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
    request_count: int = 1
    """How many requests the line stands for: more than one only for a refusal counting
    the like refusals past the first few of its minute (``pipeline/refusal_rows.py``)."""


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
    key_id: int | None = None
    """The key, in a per-key rollup row (``None`` in a group's)."""
