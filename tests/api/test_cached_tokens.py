"""Cached input tokens: reported to OpenAI callers in ``prompt_tokens`` and
``prompt_tokens_details``, kept apart in the usage record (read and written), priced by
``cached_input_per_1k`` and ``cache_write_per_1k`` to the nano-dollar, and shown by the
usage endpoint; from an Anthropic channel and from an OpenAI-compatible one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from parley.domain.pricing import Price, usd_to_nanos
from tests.api.harness import Gateway, call, records, starting
from tests.api.test_anthropic_channel import anthropic_config
from tests.upstreams.anthropic import Behaviour, FakeAnthropic
from tests.upstreams.openai_compatible import Behaviour as EngineBehaviour
from tests.upstreams.openai_compatible import FakeEngine

DOCUMENT = "x" * 1500
"""A cached prefix stands in the request: one word to the fakes' counts, 1,500 bytes to the
prompt's ceiling, which an upstream's report of 1,202 prompt tokens must fit within."""
HELLO = [{"role": "user", "content": f"hello {DOCUMENT}"}]
PRICES = {
    "input_per_1k": "0.003",
    "output_per_1k": "0.015",
    "cached_input_per_1k": "0.0003",
    "cache_write_per_1k": "0.00375",
}
PRICE = Price(
    input_per_1k=usd_to_nanos("0.003"),
    output_per_1k=usd_to_nanos("0.015"),
    cached_input_per_1k=usd_to_nanos("0.0003"),
    cache_write_per_1k=usd_to_nanos("0.00375"),
)


@pytest.fixture
async def upstream() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(behaviour=Behaviour(cache_read=1000, cache_write=200)) as running:
        yield running


@pytest.fixture
async def engine() -> AsyncIterator[FakeEngine]:
    async with FakeEngine(behaviour=EngineBehaviour(cached=2)) as running:
        yield running


@pytest.fixture
async def gateway(
    upstream: FakeAnthropic, engine: FakeEngine, tmp_path: Path
) -> AsyncIterator[Gateway]:
    def config() -> dict[str, Any]:
        settings = anthropic_config(upstream.base_url, engine.base_url, tmp_path)
        settings["channels"][0]["api_key"] = None
        settings["channels"][1]["models"].append({"name": "gpt-cached", "upstream": "gpt"})
        settings["models"][0]["prices"] = PRICES
        gpt_prices = {"input_per_1k": "0.002", "cached_input_per_1k": "0.001"}
        gpt_prices["output_per_1k"] = "0.004"
        settings["models"].append({"name": "gpt-cached", "prices": gpt_prices})
        return settings

    async with starting(config) as start:
        yield await start()


async def test_an_anthropic_channels_cached_tokens_reach_an_openai_caller_and_the_bill(
    gateway: Gateway,
) -> None:
    key = await gateway.key(await gateway.group("team"))
    reply = await gateway.client(key).chat.completions.create(
        model="claude-large",
        messages=HELLO,  # type: ignore[arg-type]
    )
    usage = reply.usage
    assert usage is not None
    assert usage.prompt_tokens == 2 + 1000 + 200
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 1000
    stream = await gateway.client(key).chat.completions.create(
        model="claude-large",
        messages=HELLO,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    last = [chunk async for chunk in stream][-1]
    assert last.usage is not None and last.usage.prompt_tokens == 1202
    assert last.usage.prompt_tokens_details is not None
    assert last.usage.prompt_tokens_details.cached_tokens == 1000
    found = await records(gateway)
    assert len(found) == 2
    for record in found:
        assert (record.prompt_tokens, record.completion_tokens) == (1202, 3)
        assert (record.cached_tokens, record.cache_write_tokens) == (1000, 200)
        assert record.cost_nanos == PRICE.cost(
            prompt_tokens=1202, completion_tokens=3, cached_tokens=1000, cache_write_tokens=200
        )
        assert record.cost_nanos == 2 * 3000 + 1000 * 300 + 200 * 3750 + 3 * 15000


async def test_a_passed_through_messages_call_bills_its_cached_tokens(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    client = anthropic.AsyncAnthropic(base_url=gateway.base_url, api_key=key, max_retries=0)
    try:
        message = await client.messages.create(model="claude-large", max_tokens=50, messages=HELLO)
        async with client.messages.stream(
            model="claude-large", max_tokens=50, messages=HELLO
        ) as stream:
            final = await stream.get_final_message()
    finally:
        await client.close()
    for usage in (message.usage, final.usage):
        assert (usage.input_tokens, usage.output_tokens) == (2, 3)
        assert usage.cache_read_input_tokens == 1000
        assert usage.cache_creation_input_tokens == 200
    found = await records(gateway)
    assert [(r.cached_tokens, r.cache_write_tokens, r.prompt_tokens) for r in found] == [
        (1000, 200, 1202),
        (1000, 200, 1202),
    ]
    assert all(r.cost_nanos == 1_101_000 for r in found)
    status, usage_report = await call(gateway, "GET", "/v1/dashboard/billing/usage", key)
    assert status == 200
    assert usage_report["totals"]["cached_tokens"] == 2000
    assert usage_report["totals"]["cache_write_tokens"] == 400
    (item,) = [i for day in usage_report["daily_costs"] for i in day["line_items"]]
    assert (item["cached_tokens"], item["cache_write_tokens"]) == (2000, 400)


async def test_an_openai_compatible_upstreams_cached_tokens_are_billed(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    messages = [{"role": "user", "content": "one two three four five"}]
    reply = await gateway.client(key).chat.completions.create(
        model="gpt-cached",
        messages=messages,  # type: ignore[arg-type]
    )
    assert reply.usage is not None and reply.usage.prompt_tokens == 5
    assert reply.usage.prompt_tokens_details is not None
    assert reply.usage.prompt_tokens_details.cached_tokens == 2
    stream = await gateway.client(key).chat.completions.create(
        model="gpt-cached",
        messages=messages,
        stream=True,  # type: ignore[arg-type]
    )
    _ = [chunk async for chunk in stream]
    price = Price(
        input_per_1k=usd_to_nanos("0.002"),
        cached_input_per_1k=usd_to_nanos("0.001"),
        output_per_1k=usd_to_nanos("0.004"),
        cache_write_per_1k=usd_to_nanos("0.002"),  # the input price, as none is set
    )
    for record in await records(gateway):
        assert (record.prompt_tokens, record.cached_tokens, record.cache_write_tokens) == (5, 2, 0)
        assert record.cost_nanos == price.cost(
            prompt_tokens=5, completion_tokens=record.completion_tokens, cached_tokens=2
        )
        assert record.cost_nanos == 3 * 2000 + 2 * 1000 + record.completion_tokens * 4000
