"""A usage record for tests that write the store directly: the fields a test cares
about are arguments, the rest fixed (a successful chat call)."""

from __future__ import annotations

from datetime import UTC, datetime

from parley.domain.usage import UsageRecord


def usage_record(
    request_id: str,
    *,
    created_at: datetime | None = None,
    group_id: int = 1,
    key_id: int = 1,
    model: str = "chat-large",
    prompt: int = 10,
    completion: int = 5,
    cost: int = 1_000,
) -> UsageRecord:
    return UsageRecord(
        request_id=request_id,
        created_at=created_at or datetime.now(UTC),
        group_id=group_id,
        key_id=key_id,
        model=model,
        channel="engine",
        endpoint="/v1/chat/completions",
        status=200,
        latency_ms=12,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_nanos=cost,
    )
