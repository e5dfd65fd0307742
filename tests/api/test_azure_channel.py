"""A channel of ``type: azure-openai``: the OpenAI adapter at Azure's deployment and v1
URLs, with an ``api-key`` or an Entra bearer token, through the official ``openai`` and
``anthropic`` SDKs; Azure's content filtering told as ``content_filter``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from tests.api.harness import (
    CHANNEL_KEY,
    Gateway,
    local_state,
    records,
    starting,
    streamed_text,
    usage_stream,
    with_backup,
)
from tests.upstreams.azure import PROMPT_FILTERED, FakeAzure

TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.fake-entra-token"
HELLO = [{"role": "user", "content": "hello there"}]
DOCUMENT = "x" * 1500


def azure_config(endpoint: str, backup_url: str, workdir: Path) -> dict[str, Any]:
    timeouts = {"connect": 2, "read": 5}
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "azure",
                "type": "azure-openai",
                "base_url": endpoint,
                "api_key": CHANNEL_KEY,
                "azure": {"api_version": "2024-10-21"},
                "models": [
                    {"name": "gpt-azure", "upstream": "gpt4o"},
                    {"name": "gpt-azure-tools", "upstream": "gpt4o+tools"},
                    {"name": "gpt-azure-strict", "upstream": "gpt4o+filter-output"},
                    {"name": "gpt-azure-touchy", "upstream": "gpt4o+filter-prompt"},
                    {"name": "gpt-azure-cached", "upstream": "gpt4o+cached-1000"},
                    {"name": "gpt-azure-busy", "upstream": "gpt4o+fail-429"},
                    {"name": "embed-azure", "upstream": "embedder"},
                ],
                "priority": 1,
                "timeouts": timeouts,
            },
            {
                "name": "azure-v1",
                "type": "azure-openai",
                "base_url": endpoint,
                "api_key": TOKEN,
                "azure": {"auth": "bearer"},
                "models": [
                    {"name": "gpt-azure-v1", "upstream": "gpt4o"},
                    {"name": "embed-azure-v1", "upstream": "embedder"},
                ],
                "timeouts": timeouts,
            },
            {
                "name": "backup",
                "base_url": backup_url,
                "models": [{"name": "gpt-azure-busy", "upstream": "backup-chat"}],
                "timeouts": timeouts,
            },
        ],
        "models": [
            {
                "name": "gpt-azure",
                "vision": True,
                "prices": {"input_per_1k": "0.0025", "output_per_1k": "0.01"},
            },
            {"name": "gpt-azure-tools", "vision": True},
            {"name": "gpt-azure-strict"},
            {"name": "gpt-azure-touchy"},
            {
                "name": "gpt-azure-cached",
                "prices": {
                    "input_per_1k": "0.0025",
                    "output_per_1k": "0.01",
                    "cached_input_per_1k": "0.00125",
                },
            },
            {"name": "gpt-azure-busy"},
            {"name": "gpt-azure-v1"},
            {"name": "embed-azure", "kind": "embedding", "prices": {"input_per_1k": "0.0001"}},
            {"name": "embed-azure-v1", "kind": "embedding"},
        ],
    }


@pytest.fixture
async def upstream() -> AsyncIterator[FakeAzure]:
    deployments = {"gpt4o": "gpt-4o-2024-08-06", "embedder": "text-embedding-3-small"}
    async with FakeAzure(api_key=CHANNEL_KEY, token=TOKEN, deployments=deployments) as running:
        yield running


@pytest.fixture
async def gateway(upstream: FakeAzure, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with with_backup(
        lambda backup: azure_config(upstream.endpoint, backup, tmp_path)
    ) as gateway:
        yield gateway


async def test_a_chat_call_reaches_an_azure_deployment(
    gateway: Gateway, key: str, upstream: FakeAzure
) -> None:
    reply = await gateway.client(key).chat.completions.create(
        model="gpt-azure",
        messages=HELLO,
        max_tokens=50,  # type: ignore[arg-type]
    )
    assert reply.choices[0].message.content == "echo: hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "gpt-azure"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (2, 3)
    sent = upstream.last_request
    assert sent.path == "/openai/deployments/gpt4o/chat/completions"
    assert sent.headers["api-key"] == CHANNEL_KEY
    assert "Authorization" not in sent.headers
    assert sent.body["messages"] == HELLO and sent.body["max_tokens"] == 50
    (record,) = await records(gateway)
    assert record.channel == "azure" and record.cost_nanos == 2 * 2500 + 3 * 10000


async def test_a_stream_from_a_deployment_with_its_prompt_filter_chunk(
    gateway: Gateway, key: str, upstream: FakeAzure
) -> None:
    chunks = await usage_stream(gateway, key, HELLO, model="gpt-azure")
    assert streamed_text(chunks) == ("echo: hello there")
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3
    assert upstream.last_request.body["stream_options"] == {"include_usage": True}
    (record,) = await records(gateway)
    assert (record.prompt_tokens, record.completion_tokens) == (2, 3)


async def test_the_v1_endpoint_with_an_entra_token(
    gateway: Gateway, key: str, upstream: FakeAzure
) -> None:
    reply = await gateway.client(key).chat.completions.create(
        model="gpt-azure-v1",
        messages=HELLO,  # type: ignore[arg-type]
    )
    assert reply.choices[0].message.content == "echo: hello there"
    sent = upstream.last_request
    assert sent.path == "/openai/v1/chat/completions"
    assert sent.headers["Authorization"] == f"Bearer {TOKEN}"
    assert "api-key" not in sent.headers
    assert sent.body["model"] == "gpt4o"
    vectors = await gateway.client(key).embeddings.create(model="embed-azure-v1", input="a b")
    assert vectors.data[0].embedding == [3.0, 0.0, 0.5]
    assert upstream.last_request.path == "/openai/v1/embeddings"


async def test_embeddings_from_a_deployment(
    gateway: Gateway, key: str, upstream: FakeAzure
) -> None:
    vectors = await gateway.client(key).embeddings.create(
        model="embed-azure", input=["one two", "three"]
    )
    assert [item.embedding for item in vectors.data] == [[7.0, 0.0, 0.5], [5.0, 1.0, 0.5]]
    assert vectors.usage.prompt_tokens == 3
    assert upstream.last_request.path == "/openai/deployments/embedder/embeddings"


async def test_classic_completions_reach_a_deployment(
    gateway: Gateway, key: str, upstream: FakeAzure
) -> None:
    reply = await gateway.client(key).completions.create(model="gpt-azure", prompt="hello there")
    assert reply.choices[0].text == "echo: hello there"
    assert reply.model == "gpt-azure"
    assert upstream.last_request.path == "/openai/deployments/gpt4o/completions"


async def test_tools_and_images_round_trip_through_azure(
    gateway: Gateway, key: str, upstream: FakeAzure
) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    client = gateway.client(key)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    first = await client.chat.completions.create(
        model="gpt-azure-tools",
        messages=[{"role": "user", "content": [{"type": "text", "text": "what is this"}, image]}],  # type: ignore[list-item]
        tools=tools,  # type: ignore[arg-type]
    )
    assert first.choices[0].finish_reason == "tool_calls"
    (call,) = first.choices[0].message.tool_calls or []
    assert orjson.loads(call.function.arguments) == {"query": "echo: what is this"}  # type: ignore[union-attr]
    assert upstream.last_request.body["messages"][0]["content"][1] == image
    second = await client.chat.completions.create(
        model="gpt-azure-tools",
        messages=[
            {"role": "user", "content": "what is this"},
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "a cat"},
        ],  # type: ignore[list-item]
        tools=tools,  # type: ignore[arg-type]
    )
    assert second.choices[0].finish_reason == "stop"
    assert upstream.last_request.body["messages"][2]["tool_call_id"] == call.id


async def test_azure_content_filters_are_content_filter(gateway: Gateway, key: str) -> None:
    client = gateway.client(key)
    reply = await client.chat.completions.create(model="gpt-azure-strict", messages=HELLO)  # type: ignore[arg-type]
    assert reply.choices[0].finish_reason == "content_filter"
    assert reply.choices[0].message.content == "echo:"
    stream = await client.chat.completions.create(
        model="gpt-azure-strict",
        messages=HELLO,
        stream=True,  # type: ignore[arg-type]
    )
    finishes = [c.choices[0].finish_reason async for c in stream if c.choices]
    assert finishes[-1] == "content_filter"
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="gpt-azure-touchy", messages=HELLO)  # type: ignore[arg-type]
    body = refused.value.body
    assert body["code"] == "content_filter"  # type: ignore[index]
    assert body["param"] == "prompt"  # type: ignore[index]
    assert body["message"] == PROMPT_FILTERED  # type: ignore[index]
    assert CHANNEL_KEY not in str(body)


async def test_a_throttled_deployment_fails_over(gateway: Gateway, key: str) -> None:
    reply = await gateway.client(key).chat.completions.create(
        model="gpt-azure-busy",
        messages=HELLO,  # type: ignore[arg-type]
    )
    assert reply.choices[0].message.content == "echo: hello there"
    assert {record.channel for record in await records(gateway)} == {"backup"}


@pytest.mark.parametrize(
    ("field", "value"), [("api_key", "sk-not-the-key"), ("azure", {"api_version": "1999-01-01"})]
)
async def test_a_wrong_key_or_api_version_is_the_channels_fault(
    upstream: FakeAzure, tmp_path: Path, field: str, value: Any
) -> None:
    def config() -> dict[str, Any]:
        settings = azure_config(upstream.endpoint, "http://127.0.0.1:9", tmp_path)
        settings["channels"][0][field] = value
        return settings

    async with starting(config) as start:
        gateway = await start()
        key = await gateway.key(await gateway.group("team"))
        with pytest.raises(openai.APIStatusError) as failed:
            await gateway.client(key).chat.completions.create(model="gpt-azure", messages=HELLO)  # type: ignore[arg-type]
    assert failed.value.status_code == 502
    assert "sk-not-the-key" not in str(failed.value.body)
    assert upstream.last_request.path == "/openai/deployments/gpt4o/chat/completions"


async def test_azure_cached_tokens_are_billed_exactly(gateway: Gateway, key: str) -> None:
    messages = [{"role": "user", "content": f"hello {DOCUMENT}"}]
    reply = await gateway.client(key).chat.completions.create(
        model="gpt-azure-cached",
        messages=messages,  # type: ignore[arg-type]
    )
    assert reply.usage is not None and reply.usage.prompt_tokens == 1002
    assert reply.usage.prompt_tokens_details is not None
    assert reply.usage.prompt_tokens_details.cached_tokens == 1000
    (record,) = await records(gateway)
    assert (record.prompt_tokens, record.cached_tokens, record.completion_tokens) == (1002, 1000, 3)
    assert record.cost_nanos == 2 * 2500 + 1000 * 1250 + 3 * 10000


async def test_a_messages_caller_reaches_azure(
    gateway: Gateway, key: str, upstream: FakeAzure
) -> None:
    client = gateway.claude(key)
    message = await client.messages.create(
        model="gpt-azure",
        max_tokens=50,
        system="Be brief.",
        messages=HELLO,  # type: ignore[arg-type]
    )
    assert message.content[0].text == "echo: hello there"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn" and message.model == "gpt-azure"
    sent = upstream.last_request
    assert sent.path == "/openai/deployments/gpt4o/chat/completions"
    assert sent.body["messages"][0] == {"role": "system", "content": "Be brief."}
    async with client.messages.stream(
        model="gpt-azure-tools",
        max_tokens=50,
        messages=HELLO,  # type: ignore[arg-type]
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
    ) as stream:
        final = await stream.get_final_message()
    assert [block.type for block in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"query": "echo: hello there"}  # type: ignore[union-attr]
    assert final.stop_reason == "tool_use"
    assert upstream.last_request.body["stream"] is True
