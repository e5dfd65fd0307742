"""POST /v1/chat/completions through the official openai SDK, plain and streamed."""

from __future__ import annotations

import openai
import pytest

from tests.api.harness import CHANNEL_KEY, Gateway
from tests.upstreams.openai_compatible import Behaviour, FakeEngine


async def test_plain_chat_reply_has_openai_shape_and_usage(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    client = gateway.client(key)
    reply = await client.chat.completions.create(
        model="chat-large", messages=[{"role": "user", "content": "hello there friend"}]
    )
    assert reply.id.startswith("chatcmpl-")
    assert reply.object == "chat.completion"
    assert reply.model == "chat-large"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content == "echo: hello there friend"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (3, 4)
    assert reply.usage.total_tokens == 7
    sent = engine.last_request
    assert sent.body["model"] == "upstream-chat"
    assert sent.authorization == f"Bearer {CHANNEL_KEY}"


async def test_streamed_chat_arrives_chunk_by_chunk_without_usage_unless_asked(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    client = gateway.client(key)
    stream = await client.chat.completions.create(
        model="chat-large", messages=[{"role": "user", "content": "one two three"}], stream=True
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: one two three"
    assert all(c.model == "chat-large" and c.id.startswith("chatcmpl-") for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert all(c.usage is None and c.choices for c in chunks)
    assert engine.last_request.body["stream_options"] == {"include_usage": True}


async def test_streamed_chat_with_include_usage_ends_with_the_usage_chunk(
    gateway: Gateway, key: str
) -> None:
    client = gateway.client(key)
    stream = await client.chat.completions.create(
        model="chat-large",
        messages=[{"role": "user", "content": "one two three"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4


async def test_other_openai_fields_pass_through_to_the_upstream(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    await gateway.client(key).chat.completions.create(
        model="chat-large",
        messages=[{"role": "user", "content": "x"}],
        tools=tools,  # type: ignore[arg-type]
        response_format={"type": "json_object"},
        top_p=0.5,
        stop=["END"],
        seed=7,
        user="u1",
    )
    body = engine.last_request.body
    assert body["tools"] == tools
    assert body["response_format"] == {"type": "json_object"}
    assert (body["top_p"], body["stop"], body["seed"], body["user"]) == (0.5, ["END"], 7, "u1")


async def test_alias_routes_and_retired_alias_carries_deprecation(
    gateway: Gateway, key: str
) -> None:
    client = gateway.client(key)
    reply = await client.chat.completions.create(
        model="chat", messages=[{"role": "user", "content": "x"}]
    )
    assert reply.model == "chat-large"
    raw = await client.chat.completions.with_raw_response.create(
        model="chat-legacy", messages=[{"role": "user", "content": "x"}]
    )
    assert raw.headers["deprecation"] == "true"
    assert raw.parse().model == "chat-large"


async def test_a_streamed_retired_alias_routes_and_carries_deprecation(
    gateway: Gateway, key: str
) -> None:
    client = gateway.client(key)
    async with client.chat.completions.with_streaming_response.create(
        model="chat-legacy", messages=[{"role": "user", "content": "x"}], stream=True
    ) as raw:
        assert raw.headers["deprecation"] == "true"
        assert raw.headers["x-request-id"].startswith("req_")
        chunks = [chunk async for chunk in await raw.parse()]
    assert chunks
    assert {chunk.model for chunk in chunks} == {"chat-large"}


async def test_a_stream_the_upstream_sends_at_once_reaches_the_caller_whole(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(joined=True)  # one read carries every event
    stream = await gateway.client(key).chat.completions.create(
        model="chat-large",
        messages=[{"role": "user", "content": "one two three"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: one two three"
    assert all(c.model == "chat-large" and c.id.startswith("chatcmpl-") for c in chunks)
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4


async def test_images_only_for_vision_models(gateway: Gateway, key: str) -> None:
    client = gateway.client(key)
    image = {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png"}}
    content = [{"type": "text", "text": "what is this"}, image]
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="chat-large",
            messages=[{"role": "user", "content": content}],  # type: ignore[misc,list-item]
        )
    assert refused.value.code == "image_not_supported"
    assert refused.value.param == "messages[0].content[1]"
    reply = await client.chat.completions.create(
        model="vision-small",
        messages=[{"role": "user", "content": content}],  # type: ignore[misc,list-item]
    )
    assert reply.choices[0].message.content is not None


async def test_data_url_image_over_the_limit_is_413_asking_to_downscale(
    gateway: Gateway, key: str
) -> None:
    big = "data:image/png;base64," + "A" * 4000  # 3000 bytes > max_image_bytes 1000
    content = [{"type": "image_url", "image_url": {"url": big}}]
    with pytest.raises(openai.APIStatusError) as refused:
        await gateway.client(key).chat.completions.create(
            model="vision-small",
            messages=[{"role": "user", "content": content}],  # type: ignore[misc,list-item]
        )
    assert refused.value.status_code == 413
    assert "downscale" in refused.value.message.lower()
