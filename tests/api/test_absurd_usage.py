"""Absurd usage is never free: whatever an upstream reports in place of a count (a float
such as 1e30, a string, a negative, a boolean) or past what the call allowed, whole or
streamed, in every caller's dialect and from every kind of upstream, is ignored, and
Parley's estimate of what was delivered is billed, marked estimated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.harness import records
from tests.api.upstreams_harness import Upstreams, ask, every_upstream
from tests.upstreams import anthropic, bedrock, gemini, openai_compatible

ABSURD: list[Any] = [1e30, 1.5e300, "77777777", -5, True, 77_777_777]
"""Not counts (the last is one, but past the 16 tokens out the calls allow)."""
OUTPUT = {"openai": "completion_tokens", "claude": "output_tokens",
          "gemini": "candidatesTokenCount", "bedrock": "outputTokens"}  # fmt: skip
"""Each upstream's name for the output count."""


@pytest.fixture
async def upstreams(tmp_path: Path) -> AsyncIterator[Upstreams]:
    async for running in every_upstream(tmp_path):
        yield running


def report(upstreams: Upstreams, model: str, count: str, value: Any) -> None:
    """Make the upstream behind ``model`` report ``value`` as its ``count``."""
    usage = {count: value}
    if model == "claude":
        upstreams.anthropic.behaviour = anthropic.Behaviour(usage=usage)
    elif model == "gemini":
        upstreams.gemini.behaviour = gemini.Behaviour(usage=usage)
    elif model == "bedrock":
        upstreams.bedrock.behaviour = bedrock.Behaviour(usage=usage)
    else:
        counts = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8, **usage}
        upstreams.engine.behaviour = openai_compatible.Behaviour(reported=counts)


CASES = [
    ("chat", "openai"), ("chat", "claude"), ("chat", "gemini"), ("chat", "bedrock"),
    ("responses", "claude"), ("responses", "openai"), ("responses", "gemini"),
    ("messages", "claude"), ("messages", "openai"), ("messages", "bedrock"),
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(("dialect", "model"), CASES, ids=[f"{d}-{m}" for d, m in CASES])
async def test_an_absurd_output_count_bills_the_estimate(
    upstreams: Upstreams, dialect: str, model: str, stream: bool
) -> None:
    gateway = upstreams.gateway
    key = await gateway.key(await gateway.group("team"))
    for value in ABSURD:
        report(upstreams, model, OUTPUT[model], value)
        status, _ = await ask(gateway, key, dialect, model, stream=stream)
        assert status == 200, value
    billed = await records(gateway)
    assert len(billed) == len(ABSURD)
    for record in billed:
        assert record.estimated, record
        assert 0 < record.completion_tokens <= 16, record
        assert record.cost_nanos >= record.completion_tokens * 15_000, record


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("count", ["input_tokens", "cache_read_input_tokens"])
async def test_an_absurd_input_count_bills_the_estimate(
    upstreams: Upstreams, count: str, stream: bool
) -> None:
    gateway = upstreams.gateway
    key = await gateway.key(await gateway.group("team"))
    for value in [*ABSURD[:-1], 10**12]:
        report(upstreams, "claude", count, value)
        status, _ = await ask(gateway, key, "chat", "claude", stream=stream)
        assert status == 200, value
    for record in await records(gateway):
        assert record.estimated and record.cost_nanos > 0, record
        assert record.cached_tokens == 0 and 0 < record.prompt_tokens < 1000, record


async def test_absurd_usage_does_not_get_calls_past_a_budget(upstreams: Upstreams) -> None:
    gateway = upstreams.gateway
    key = await gateway.key(await gateway.group("team", budget_nanos=1_000_000))  # $0.001
    report(upstreams, "claude", "output_tokens", 1e30)
    statuses = []
    for _ in range(30):
        status, _ = await ask(gateway, key, "chat", "claude", stream=True)
        statuses.append(status)
    assert statuses.count(200) < 30
    assert set(statuses) == {200, 429}
    assert sum(record.cost_nanos for record in await records(gateway)) >= 900_000
