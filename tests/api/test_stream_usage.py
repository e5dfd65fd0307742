"""Streamed usage when the upstream gives none (llama.cpp's server sends no usage chunk
even when asked): a caller who asked for ``include_usage`` still gets the usage chunk,
from Parley's own count, and the usage record is marked estimated."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.harness import Gateway, records, usage_stream
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

MESSAGES: Any = [{"role": "user", "content": "hello there friend"}]


async def test_parley_sends_the_usage_chunk_an_upstream_did_not(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(usage=False, words=8)
    chunks = await usage_stream(gateway, key, MESSAGES)
    *content, last = chunks
    assert last.choices == []
    assert last.usage is not None
    assert last.object == "chat.completion.chunk"
    assert last.model == "chat-large"
    assert last.id == content[0].id
    assert all(chunk.usage is None for chunk in content)
    (record,) = await records(gateway)
    assert record.estimated
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (
        record.prompt_tokens,
        record.completion_tokens,
    )
    assert last.usage.total_tokens == record.prompt_tokens + record.completion_tokens
    assert record.completion_tokens >= 8


async def test_classic_completion_streams_get_it_too(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(usage=False)
    stream = await gateway.client(key).completions.create(
        model="chat-large",
        prompt="one two three",
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].usage is not None
    assert chunks[-1].choices == []
    assert chunks[-1].object == "text_completion"
    (record,) = await records(gateway)
    assert record.estimated
    assert chunks[-1].usage.completion_tokens == record.completion_tokens


@pytest.mark.parametrize("upstream_usage", [True, False])
async def test_without_include_usage_no_usage_chunk_is_sent(
    gateway: Gateway, key: str, engine: FakeEngine, upstream_usage: bool
) -> None:
    engine.behaviour = Behaviour(usage=upstream_usage)
    stream = await gateway.client(key).chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert all(chunk.usage is None for chunk in chunks)
    assert all(chunk.choices for chunk in chunks)
    (record,) = await records(gateway)
    assert record.estimated is not upstream_usage


async def test_an_upstream_usage_chunk_is_relayed_not_doubled(gateway: Gateway, key: str) -> None:
    chunks = await usage_stream(gateway, key, MESSAGES)
    assert [chunk for chunk in chunks if chunk.usage is not None] == [chunks[-1]]
    (record,) = await records(gateway)
    assert not record.estimated
