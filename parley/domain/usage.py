"""What one call consumed, the most it may consume, and the record the meter writes.

An upstream's own count becomes a ``Usage`` only through ``reported_counts`` (or
``reported_usage``, built on it), the one validator of every number an upstream reports,
whole or streamed, in every dialect: a count is a non-negative integer below
``MAX_COUNT``, and a report holding anything else (a negative, a float, a string, a
boolean) is ignored whole, logged, and the call falls back to Parley's estimate. A report
carries that estimate (``Usage.fallback``, ``with_estimate``), and the ``Allowance`` bills
it instead when the report goes past what the call allowed; whatever is billed, reported
or estimated, is capped by the allowance.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any, overload

from parley.domain.images import Grade
from parley.domain.value import value

log = logging.getLogger("parley.usage")

MAX_COUNT = 1_000_000_000
"""The largest count an upstream may report: no call consumes a billion tokens, and a
larger number would overflow the ledger's 64-bit sums once priced."""


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
    """True when the bill is not the upstream's report: it reported nothing valid, or
    more than the call allowed, and Parley counted for itself (or billed its bound)."""
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    fallback: Usage | None = field(default=None, compare=False)
    """Parley's estimate of the same call, carried by an upstream's report: what is billed
    instead (marked estimated) when the report goes past the call's allowance."""
    search_units: int = 0
    """A rerank's search units: one query over up to 100 documents (Cohere's unit)."""
    images: int = 0
    """Images made, priced by ``image_grade`` when the model has a ``per_image`` table."""
    image_grade: Grade | None = None
    image_tokens: int = 0
    """Of ``prompt_tokens``, those of input images (priced as such)."""
    audio_tokens: int = 0
    """Of ``prompt_tokens``, those of input audio (a realtime turn's; priced as such)."""
    cached_audio_tokens: int = 0
    """Of ``audio_tokens`` (and of ``cached_tokens``), those read from the cache."""
    audio_output_tokens: int = 0
    """Of ``completion_tokens``, those of output audio (priced as such)."""

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
    search_units: int = 0
    images: int = 0
    image_grade: Grade | None = None
    """The grade the images are held at (an ``auto`` part at the dearest it can be)."""

    def cap(self, usage: Usage) -> Usage:
        """What is billed for ``usage``: itself when within the allowance (the same
        object); for an upstream's report past it, the estimate it carries (a report
        past what the call allowed is not believed), marked estimated; and whatever is
        billed, field by field within the allowance."""
        if (
            usage.prompt_tokens <= self.prompt_tokens
            and (self.open_ended or usage.completion_tokens <= self.completion_tokens)
            and usage.characters <= self.characters
            and usage.audio_ms <= self.audio_ms
            and usage.search_units <= self.search_units
            and usage.images <= self.images
        ):
            return usage
        fallback = usage.fallback
        if fallback is not None and not usage.estimated:
            return self.cap(replace(fallback, estimated=True))
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
            estimated=True,  # the bill is Parley's bound, not what was reported
            cached_tokens=cached,
            cache_write_tokens=min(usage.cache_write_tokens, prompt - cached),
            reasoning_tokens=min(usage.reasoning_tokens, completion),
            search_units=min(usage.search_units, self.search_units),
            images=min(usage.images, self.images),
            image_grade=usage.image_grade,
            image_tokens=min(usage.image_tokens, prompt),
            audio_tokens=min(usage.audio_tokens, prompt),
            cached_audio_tokens=min(usage.cached_audio_tokens, cached),
            audio_output_tokens=min(usage.audio_output_tokens, completion),
        )


NOTHING = Allowance()
"""The allowance of a call that consumes nothing billable (voice clones and deletes)."""
_MOST = 2**62
UNBOUNDED = Allowance(_MOST, _MOST, _MOST, _MOST, True, _MOST, _MOST)
"""An allowance that caps nothing: a job's until the runner asks for its own at
admission."""


@overload
def with_estimate(reported: Usage | None, estimate: Usage) -> Usage: ...
@overload
def with_estimate(reported: Usage | None, estimate: Usage | None) -> Usage | None: ...
def with_estimate(reported: Usage | None, estimate: Usage | None) -> Usage | None:
    """What a call is billed from: the upstream's report carrying Parley's ``estimate``
    (billed instead if the report goes past the call's allowance), else the estimate."""
    if reported is None or reported.estimated:
        return estimate if estimate is not None else reported
    if estimate is None:
        return reported
    # Positional, in the fields' order: built once per call, as cheaply as it can be.
    return Usage(
        reported.prompt_tokens,
        reported.completion_tokens,
        reported.characters,
        reported.audio_ms,
        reported.estimated,
        reported.cached_tokens,
        reported.cache_write_tokens,
        reported.reasoning_tokens,
        estimate,
        reported.search_units,
        reported.images,
        reported.image_grade,
        reported.image_tokens,
        reported.audio_tokens,
        reported.cached_audio_tokens,
        reported.audio_output_tokens,
    )


def reported_counts(
    reported: Mapping[str, Any], *, source: str, required: Collection[str]
) -> dict[str, int] | None:
    """An upstream's counts, by name, each a non-negative integer up to ``MAX_COUNT`` (an
    absent one, ``None``, is 0): the one reader of every number an upstream reports.

    ``None`` when it reported none (every ``required`` count absent), or when any count
    is not a count: the report is then ignored whole and logged (``source`` says whose it
    was), and the caller estimates.
    """
    counts: dict[str, int] = {}
    for name, count in reported.items():
        if type(count) is int and 0 <= count <= MAX_COUNT:
            counts[name] = count
        elif count is None and name not in required:
            counts[name] = 0
        elif count is None and all(reported.get(other) is None for other in required):
            return None
        else:
            log.warning(
                "ignored the usage %s reported (%s=%.40r): not a count; Parley's estimate "
                "is billed instead",
                source,
                name,
                count,
            )
            return None
    return counts


def reported_usage(
    reported: Any,
    *,
    source: str,
    prompt: str = "prompt_tokens",
    completion: str | None = "completion_tokens",
) -> Usage | None:
    """The usage an upstream reported, or ``None`` when it reported none or nothing valid.

    ``reported`` is the upstream's usage object; ``prompt`` and ``completion`` name its
    counts (``completion=None`` when the operation has no output count, as embeddings),
    read by ``reported_counts``.
    """
    if not isinstance(reported, dict):  # a JSON object, as parsed
        return None
    names = (prompt,) if completion is None else (prompt, completion)
    counts = reported_counts(
        {name: reported.get(name) for name in names}, source=source, required=names
    )
    if counts is None:
        return None
    return Usage(counts[prompt], counts[completion] if completion is not None else 0)


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
    search_units: int = 0
    """A rerank's search units (``Usage.search_units``); 0 for every other call."""
    key_prefix: str = ""
    """The display prefix of the secret that made the call (a rotation's previous secret
    in its grace has its own): the log keeps it after the key is rotated."""
    error_detail: str | None = None
    """Why a failed call failed, for the operator: an upstream's refusal as its status and
    its own message (redacted), else what the caller was told. None for a success."""
    price: str | None = None
    """The unit prices the call was billed at (``Price.tag``: the model's price in force
    when it was admitted); ``None`` for a call not billed (refused or failed)."""


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
