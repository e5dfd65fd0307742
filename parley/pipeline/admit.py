"""Stage 2: may this caller make this call now? Model access, budget, rates.

A group with a budget, and a key with one of its own, has the call's worst case (its
``Allowance`` at the model's prices) held against it before anything else
(``Limiter.hold_spend``); each hold is released, and the real cost counted, when the
call is metered (``Meter.finish``), or at once when a later check refuses the call.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime

from parley.domain.models import ModelRegistry, Resolved
from parley.domain.pricing import Price
from parley.domain.usage import Allowance
from parley.errors import InvalidRequest, ModelNotFound, QuotaExceeded, RateLimited
from parley.limits.base import Budget, Decision, Limiter, Scope
from parley.limits.headers import go_duration, rate_limit_headers, retry_headers
from parley.pipeline.authenticate import Caller
from parley.runtime.budget import SpendLedger


@dataclass(slots=True)
class Admission:
    """What admission took, so the meter can settle it and the reply can report it."""

    scopes: tuple[Scope, ...]
    reserved_tokens: int
    allowance: Allowance
    """The most the call may consume: its usage is capped there."""
    headers: dict[str, str] = field(default_factory=dict)
    budget: Budget | None = None
    """The group's budget the call holds ``held_nanos`` of (``None``: no budget)."""
    held_nanos: int = 0
    key_budget: Budget | None = None
    """The key's own budget the call holds ``held_nanos`` of too (``None``: none)."""


GROUP_BUDGET_SPENT = (
    "Your group has used its budget for this period. Ask your administrator to "
    "raise the budget, or wait for the next period."
)
KEY_BUDGET_SPENT = (
    "This API key has used its own budget for this period. Ask your administrator to "
    "raise the key's budget, or wait for the next period."
)

KEY_SCOPE = "k:"
"""The name of a key's own rate scope starts so (``g:`` a group's)."""

Release = Callable[[Budget, str, int, int], None]
"""Ends a budget hold: the budget, the hold's id, the nanos held, the cost to count."""


def worst_cost(price: Price, allowance: Allowance) -> int:
    """What the call costs at most, in nano-dollars: the allowance at the model's prices
    (every input token at the dearer of the text and image input prices)."""
    dearer_images = price.image_input_per_1k > price.input_per_1k
    return price.cost(
        prompt_tokens=allowance.prompt_tokens,
        completion_tokens=allowance.completion_tokens,
        characters=allowance.characters,
        audio_ms=allowance.audio_ms,
        search_units=allowance.search_units,
        image_tokens=allowance.prompt_tokens if dearer_images else 0,
        images=allowance.images,
        image_grade=allowance.image_grade,
    )


def resolve_model(
    registry: ModelRegistry, caller: Caller, name: str, kinds: Collection[str], endpoint: str
) -> Resolved:
    """The model the caller named, if it exists, its group and key may use it, and it
    fits (a model the key may not use is as unknown as a misspelled one)."""
    resolved = registry.resolve(name)
    if resolved is None or not caller.may_use(resolved.spec.name):
        raise ModelNotFound(name)
    if resolved.spec.kind not in kinds:
        raise InvalidRequest(
            f"The model `{name}` is a {resolved.spec.kind} model and does not support {endpoint}.",
            param="model",
            code="model_not_supported",
        )
    return resolved


def scopes_for(caller: Caller) -> tuple[Scope, ...]:
    group_scope = Scope(f"g:{caller.group.id}", caller.group.quota)
    quota = caller.key.quota
    if quota.rpm is None and quota.tpm is None:
        return (group_scope,)
    return group_scope, Scope(f"{KEY_SCOPE}{caller.key.id}", quota)


async def admit(
    limiter: Limiter,
    ledger: SpendLedger,
    caller: Caller,
    tokens: int,
    *,
    hold: str,
    allowance: Allowance,
    price: Price,
    release: Release,
) -> Admission:
    """Hold the call's worst cost against the group's budget and the key's, then take
    its rates; ``hold`` is the call's unique id, ``release`` ends the holds if a later
    check refuses it."""
    budget = ledger.budget(caller.group)
    key_budget = ledger.key_budget(caller.key)
    held = worst_cost(price, allowance) if budget or key_budget else 0
    if budget is not None and not await limiter.hold_spend(budget, hold, held):
        raise _quota_exceeded(ledger)
    key_held = False
    try:
        if key_budget is not None:
            if not await limiter.hold_spend(key_budget, hold, held):
                raise _quota_exceeded(ledger, KEY_BUDGET_SPENT)
            key_held = True
        scopes = scopes_for(caller)
        decision = await limiter.acquire(scopes, tokens)
        headers = rate_limit_headers(decision)
        if not decision.allowed:
            raise _refusal(decision, tokens, headers)
    except BaseException:  # refused, cancelled or failed: the call never runs
        if budget is not None:
            release(budget, hold, held, 0)
        if key_budget is not None and key_held:
            release(key_budget, hold, held, 0)
        raise
    return Admission(scopes, tokens, allowance, headers, budget, held, key_budget)


async def take_request(limiter: Limiter, caller: Caller) -> dict[str, str]:
    """Count one request against the caller's request rates (no tokens): a call that
    is not a model call (the files API) is rate-limited like one, and refused as one
    (429). Returns the rate-limit headers of its reply."""
    decision = await limiter.acquire(scopes_for(caller), 0)
    headers = rate_limit_headers(decision)
    if not decision.allowed:
        raise _refusal(decision, 0, headers)
    return headers


async def check_room(limiter: Limiter, ledger: SpendLedger, caller: Caller) -> None:
    """Refuse as ``admit`` would if the call came now, taking nothing (``limiter.peek``)."""
    _check_budget(ledger, caller)
    decision = await limiter.peek(scopes_for(caller))
    if not decision.allowed:
        raise _refusal(decision, 0, rate_limit_headers(decision))


def _check_budget(ledger: SpendLedger, caller: Caller) -> None:
    """Refuse a group or key whose spend this instance knows of has reached its budget."""
    budget = caller.group.budget_nanos
    if budget is not None and ledger.spent(caller.group.id) >= budget:
        raise _quota_exceeded(ledger)
    own = caller.key.budget_nanos
    if own is not None and ledger.key_spent(caller.key.id) >= own:
        raise _quota_exceeded(ledger, KEY_BUDGET_SPENT)


def _quota_exceeded(ledger: SpendLedger, message: str = GROUP_BUDGET_SPENT) -> QuotaExceeded:
    # Like every 429, it says when to come back: the period's end. No retry-after:
    # ``x-should-retry: false`` tells clients not to wait it out in a retry loop.
    reset = go_duration(ledger.seconds_to_reset(datetime.now(UTC)))
    return QuotaExceeded(message, headers={"x-ratelimit-reset-budget": reset})


def _refusal(decision: Decision, tokens: int, headers: dict[str, str]) -> RateLimited:
    kind = decision.limited_by or "requests"
    if decision.too_large:
        limit = decision.tokens.limit if decision.tokens else 0
        message = (
            f"Request too large: it needs about {tokens} tokens (prompt estimate plus "
            f"max_tokens) but the limit is {limit} tokens per minute {_whose(decision)}. "
            "Lower max_tokens or shorten the prompt."
        )
        return RateLimited(message, kind="tokens", headers={**headers, "x-should-retry": "false"})
    window = decision.tokens if kind == "tokens" else decision.requests
    limit = window.limit if window else 0
    unit = "tokens" if kind == "tokens" else "requests"
    message = (
        f"Rate limit reached: {limit} {unit} per minute {_whose(decision)}. "
        f"Please try again in {decision.retry_after_seconds:.3g}s."
    )
    return RateLimited(
        message, kind=kind, headers={**headers, **retry_headers(decision.retry_after_seconds)}
    )


def _whose(decision: Decision) -> str:
    """Whose limit refused the call: the key's own rates (``scopes_for``) or the group's."""
    scope = decision.limited_scope or ""
    return "for this key" if scope.startswith(KEY_SCOPE) else "for your group"
