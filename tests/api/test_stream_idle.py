"""The idle timeout (``timeouts.idle``: the longest silence between a started stream's
events) holds for every stream, whatever its dialects: a Messages stream over an
OpenAI-compatible channel, an Anthropic channel's stream passed through to a Messages
caller or translated for an OpenAI caller. Past it the caller's stream ends with an error
event in the caller's dialect, and what was delivered is billed."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.api.harness import CHANNEL_KEY, Gateway, call, local_state, records, starting
from tests.upstreams.anthropic import Behaviour as AnthropicBehaviour
from tests.upstreams.anthropic import FakeAnthropic
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

HELLO = [{"role": "user", "content": "hello there my friend"}]
IDLE = 0.3
TIMEOUTS = {"connect": 2, "read": 30, "first_token": 5, "idle": IDLE}
"""A read timeout far above the idle one: a stall ends at the idle timeout."""


def config(anthropic_url: str, openai_url: str, workdir: Path) -> dict[str, Any]:
    prices = {"input_per_1k": "0.003", "output_per_1k": "0.015"}
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "claude",
                "type": "anthropic",
                "base_url": anthropic_url,
                "api_key": CHANNEL_KEY,
                "models": [{"name": "claude", "upstream": "claude-up"}],
                "timeouts": TIMEOUTS,
            },
            {
                "name": "engine",
                "base_url": openai_url,
                "api_key": CHANNEL_KEY,
                "models": [{"name": "chat", "upstream": "engine-chat"}],
                "timeouts": TIMEOUTS,
            },
        ],
        "models": [{"name": "claude", "prices": prices}, {"name": "chat", "prices": prices}],
    }


@pytest.fixture
async def upstream() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def gateway(
    upstream: FakeAnthropic, engine: FakeEngine, tmp_path: Path
) -> AsyncIterator[Gateway]:
    async with starting(lambda: config(upstream.base_url, engine.base_url, tmp_path)) as start:
        yield await start()


async def stream_message(gateway: Gateway, key: str, model: str) -> str:
    body = {"model": model, "max_tokens": 50, "messages": HELLO, "stream": True}
    began = time.monotonic()
    status, text = await call(gateway, "POST", "/v1/messages", key, json=body)
    assert status == 200
    assert time.monotonic() - began < 3.0, "ended at the idle timeout, not the read timeout"
    return str(text)


def ends_with_anthropic_timeout(text: str, channel: str) -> None:
    last = text.rstrip("\n").rsplit("\n\n", 1)[-1]
    assert last.startswith("event: error\ndata: ")
    assert '"type":"timeout_error"' in last and f"`{channel}`" in last
    assert "[DONE]" not in text


async def billed_for_what_came(gateway: Gateway, channel: str) -> None:
    (record,) = await records(gateway)
    assert (record.channel, record.status) == (channel, 504)
    assert record.completion_tokens > 0 and record.cost_nanos > 0


async def test_a_messages_stream_over_an_openai_channel_that_stalls(
    gateway: Gateway, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(stall_after=3)
    key = await gateway.key(await gateway.group("team"))
    text = await stream_message(gateway, key, "chat")
    assert "event: content_block_delta" in text
    ends_with_anthropic_timeout(text, "engine")
    await billed_for_what_came(gateway, "engine")


async def test_an_anthropic_stream_passed_through_that_stalls(
    gateway: Gateway, upstream: FakeAnthropic
) -> None:
    upstream.behaviour = AnthropicBehaviour(stall_after=4)
    key = await gateway.key(await gateway.group("team"))
    text = await stream_message(gateway, key, "claude")
    assert text.count("event: content_block_delta") == 1
    ends_with_anthropic_timeout(text, "claude")
    await billed_for_what_came(gateway, "claude")


async def test_an_anthropic_stream_translated_for_an_openai_caller_that_stalls(
    gateway: Gateway, upstream: FakeAnthropic
) -> None:
    upstream.behaviour = AnthropicBehaviour(stall_after=5)
    key = await gateway.key(await gateway.group("team"))
    stream = await gateway.client(key).chat.completions.create(
        model="claude",
        messages=HELLO,
        stream=True,  # type: ignore[arg-type]
    )
    got: list[Any] = []
    began = time.monotonic()
    with pytest.raises(openai.APIError) as ended:
        async for chunk in stream:
            got.append(chunk)
    assert time.monotonic() - began < 3.0
    assert "did not answer in time" in str(ended.value)
    assert any(c.choices and c.choices[0].delta.content for c in got)
    await billed_for_what_came(gateway, "claude")
