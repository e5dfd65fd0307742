"""Stage 2: may this caller make this call now? Model access, budget, rates."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime

from parley.domain.groups import Group
from parley.domain.models import ModelRegistry, Resolved
from parley.errors import InvalidRequest, ModelNotFound, QuotaExceeded, RateLimited
from parley.limits.base import Decision, Limiter, Scope
from parley.limits.headers import go_duration, rate_limit_headers, retry_headers
from parley.pipeline.authenticate import Caller
from parley.pipeline.budget import SpendLedger


@dataclass(slots=True)
class Admission:
    """What admission took, so the meter can settle it and the reply can report it."""

    scopes: tuple[Scope, ...]
    reserved_tokens: int
    headers: dict[str, str] = field(default_factory=dict)


def resolve_model(
    registry: ModelRegistry, group: Group, name: str, kinds: Collection[str], endpoint: str
) -> Resolved:
    """The model the caller named, if it exists, the group may use it, and it fits."""
    resolved = registry.resolve(name)
    if resolved is None or not group.may_use(resolved.spec.name):
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
    return group_scope, Scope(f"k:{caller.key.id}", quota)


async def admit(limiter: Limiter, ledger: SpendLedger, caller: Caller, tokens: int) -> Admission:
    _check_budget(ledger, caller)
    scopes = scopes_for(caller)
    decision = await limiter.acquire(scopes, tokens)
    headers = rate_limit_headers(decision)
    if not decision.allowed:
        raise _refusal(decision, tokens, headers)
    return Admission(scopes=scopes, reserved_tokens=tokens, headers=headers)


async def check_room(limiter: Limiter, ledger: SpendLedger, caller: Caller) -> None:
    """Refuse as ``admit`` would if the call came now, taking nothing (``limiter.peek``)."""
    _check_budget(ledger, caller)
    decision = await limiter.peek(scopes_for(caller))
    if not decision.allowed:
        raise _refusal(decision, 0, rate_limit_headers(decision))


def _check_budget(ledger: SpendLedger, caller: Caller) -> None:
    budget = caller.group.budget_nanos
    if budget is not None and ledger.spent(caller.group.id) >= budget:
        # Like every 429, it says when to come back: the period's end. No retry-after:
        # ``x-should-retry: false`` tells clients not to wait it out in a retry loop.
        reset = go_duration(ledger.seconds_to_reset(datetime.now(UTC)))
        raise QuotaExceeded(
            "Your group has used its budget for this period. Ask your administrator to "
            "raise the budget, or wait for the next period.",
            headers={"x-ratelimit-reset-budget": reset},
        )


def _refusal(decision: Decision, tokens: int, headers: dict[str, str]) -> RateLimited:
    kind = decision.limited_by or "requests"
    if decision.too_large:
        limit = decision.tokens.limit if decision.tokens else 0
        message = (
            f"Request too large: it needs about {tokens} tokens (prompt estimate plus "
            f"max_tokens) but your limit is {limit} tokens per minute. Lower max_tokens "
            "or shorten the prompt."
        )
        return RateLimited(message, kind="tokens", headers={**headers, "x-should-retry": "false"})
    window = decision.tokens if kind == "tokens" else decision.requests
    limit = window.limit if window else 0
    unit = "tokens" if kind == "tokens" else "requests"
    message = (
        f"Rate limit reached: {limit} {unit} per minute for your group. "
        f"Please try again in {decision.retry_after_seconds:.3g}s."
    )
    return RateLimited(
        message, kind=kind, headers={**headers, **retry_headers(decision.retry_after_seconds)}
    )
