"""A channel that serves the Responses API itself (``responses: native``): the call is
relayed as sent but for the model, so built-in tools, reasoning items with their
encrypted content and fields Parley does not know reach it; its reply and events come
back with the model renamed, are metered from its usage, and stored for the group."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from parley.settings import ConfigError, Settings
from tests.api.harness import records
from tests.api.responses_harness import Upstreams, responses_config, responses_gateway
from tests.upstreams.responses_api import ENCRYPTED


@pytest.fixture
async def upstreams(tmp_path: Path) -> AsyncIterator[Upstreams]:
    async for running in responses_gateway(tmp_path):
        yield running


@pytest.fixture
async def client(upstreams: Upstreams) -> openai.AsyncOpenAI:
    gateway = upstreams.gateway
    return gateway.client(await gateway.key(await gateway.group("team")))


async def test_the_call_is_relayed_as_sent_with_built_in_tools(
    client: openai.AsyncOpenAI, upstreams: Upstreams
) -> None:
    response = await client.responses.create(
        model="gpt-native",
        input="search the news",
        tools=[{"type": "web_search"}],
        include=["reasoning.encrypted_content"],
        extra_body={"future_field": {"kept": True}},
    )
    sent = upstreams.engine.last_request
    assert sent.path == "/v1/responses"
    assert sent.body["model"] == "upstream-native"
    assert sent.body["tools"] == [{"type": "web_search"}]
    assert sent.body["future_field"] == {"kept": True}
    assert response.model == "gpt-native" and response.id.startswith("resp_up")
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "web_search_call", "message"]
    assert response.output[0].encrypted_content.startswith(ENCRYPTED)  # type: ignore[union-attr]
    assert response.output_text == "echo: search the news"


async def test_reasoning_items_go_back_intact(
    client: openai.AsyncOpenAI, upstreams: Upstreams
) -> None:
    first = await client.responses.create(model="gpt-native", input="think", store=False)
    reasoning = first.output[0].model_dump(exclude_none=True)
    await client.responses.create(
        model="gpt-native",
        store=False,
        input=[
            {"role": "user", "content": "think"},
            reasoning,
            {"role": "user", "content": "again"},
        ],
    )
    sent = upstreams.engine.last_request.body["input"]
    assert sent[1] == reasoning
    assert sent[1]["encrypted_content"].startswith(ENCRYPTED)


async def test_a_native_stream_is_relayed_event_by_event(
    client: openai.AsyncOpenAI, upstreams: Upstreams
) -> None:
    async with client.responses.stream(model="gpt-native", input="stream it") as stream:
        events = [event async for event in stream]
        final = await stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert all(e.response.model == "gpt-native" for e in events if hasattr(e, "response"))
    assert final.output_text == "echo: stream it"
    assert final.output[0].encrypted_content.startswith(ENCRYPTED)  # type: ignore[union-attr]
    assert upstreams.engine.last_request.body["stream"] is True


async def test_native_responses_are_stored_metered_and_private(
    client: openai.AsyncOpenAI, upstreams: Upstreams
) -> None:
    gateway = upstreams.gateway
    first = await client.responses.create(model="gpt-native", input="one two")
    found = await client.responses.retrieve(first.id)
    assert found.output_text == "echo: one two" and found.model == "gpt-native"
    second = await client.responses.create(
        model="gpt-native", input="three", previous_response_id=first.id
    )
    assert upstreams.engine.last_request.body["previous_response_id"] == first.id
    assert second.previous_response_id == first.id
    other = gateway.client(await gateway.key(await gateway.group("others")))
    before = len(upstreams.engine.requests)
    with pytest.raises(openai.NotFoundError):
        await other.responses.create(model="gpt-native", input="x", previous_response_id=first.id)
    with pytest.raises(openai.NotFoundError):
        await other.responses.retrieve(first.id)
    assert len(upstreams.engine.requests) == before  # refused before any upstream call
    found_records = await records(gateway)
    assert [(r.model, r.endpoint, r.status) for r in found_records] == [
        ("gpt-native", "/v1/responses", 200)
    ] * 2
    usage = first.usage
    assert usage is not None
    counted = {(r.prompt_tokens, r.completion_tokens, r.estimated) for r in found_records}
    assert (usage.input_tokens, usage.output_tokens, False) in counted


async def test_a_translating_channel_still_refuses_built_in_tools(
    client: openai.AsyncOpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await client.responses.create(model="gpt-like", input="x", tools=[{"type": "web_search"}])
    assert "web_search" in refused.value.message


def test_native_on_a_channel_type_that_cannot_is_refused_at_start(tmp_path: Path) -> None:
    from parley.http import HttpClient
    from parley.providers.registry import ProviderRegistry, check_native_responses

    config: dict[str, Any] = responses_config(
        "http://127.0.0.1:1/v1", "http://127.0.0.1:2", tmp_path
    )
    config["channels"][2]["responses"] = "native"  # the anthropic channel
    settings = Settings.model_validate(config)
    with pytest.raises(ConfigError) as refused:
        check_native_responses(settings.channels, ProviderRegistry.default(HttpClient()))
    assert "channels[2].responses" in str(refused.value)
