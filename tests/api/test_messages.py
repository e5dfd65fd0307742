"""POST /v1/messages over an OpenAI-compatible channel, through the official
``anthropic`` SDK: whole and streamed replies, tools, thinking, count_tokens, Anthropic's
errors, and admission and metering as for chat."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import aiohttp
import anthropic
import pytest
from pydantic import BaseModel

from parley.domain.pricing import Price, usd_to_nanos
from tests.api.harness import Gateway, call, records
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

HELLO = [{"role": "user", "content": "hello there"}]
WEATHER_TOOL = {
    "name": "weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
}


def claude(gateway: Gateway, key: str) -> anthropic.AsyncAnthropic:
    client = gateway.claude(key)
    return client


async def test_a_message_over_an_openai_channel(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    message = await gateway.claude(key).messages.create(
        model="chat-large", max_tokens=100, system="Be brief.", messages=HELLO
    )
    assert message.type == "message" and message.role == "assistant"
    assert message.model == "chat-large"
    assert message.id.startswith("msg_")
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "echo: hello there"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (4, 3)
    sent = engine.last_request.body
    assert sent["model"] == "upstream-chat" and sent["max_tokens"] == 100
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello there"},
    ]


async def test_max_tokens_maps_to_the_stop_reason(gateway: Gateway, key: str) -> None:
    message = await gateway.claude(key).messages.create(model="chat", max_tokens=1, messages=HELLO)
    assert message.stop_reason == "max_tokens"
    assert message.model == "chat-large"


async def test_a_streamed_message_over_an_openai_channel(gateway: Gateway, key: str) -> None:
    client = gateway.claude(key)
    async with client.messages.stream(model="chat-large", max_tokens=100, messages=HELLO) as stream:
        names = [event.type async for event in stream]
        final = await stream.get_final_message()
    assert names[0] == "message_start"
    assert names[-1] == "message_stop"
    assert "content_block_delta" in names and "message_delta" in names
    assert final.content[0].text == "echo: hello there"  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 3
    assert final.model == "chat-large"


async def test_raw_stream_bytes_are_anthropic_events(gateway: Gateway, key: str) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/messages",
            headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
            json={"model": "chat-large", "max_tokens": 50, "messages": HELLO, "stream": True},
        ) as reply,
    ):
        assert reply.status == 200
        assert reply.content_type == "text/event-stream"
        text = await reply.text()
    assert text.startswith("event: message_start\ndata: ")
    assert "event: ping\n" in text
    assert text.endswith('event: message_stop\ndata: {"type":"message_stop"}\n\n')
    assert "[DONE]" not in text


async def test_tools_round_trip_over_an_openai_channel(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(tools=True)
    client = gateway.claude(key)
    first = await client.messages.create(
        model="chat-large",
        max_tokens=100,
        messages=[{"role": "user", "content": "weather in Oslo"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        tool_choice={"type": "any"},
    )
    assert first.stop_reason == "tool_use"
    tool_use = first.content[-1]
    assert tool_use.type == "tool_use"
    assert tool_use.name == "weather"
    assert tool_use.input == {"query": "echo: weather in Oslo"}
    sent = engine.last_request.body
    assert sent["tools"][0]["function"]["parameters"] == WEATHER_TOOL["input_schema"]
    assert sent["tool_choice"] == "required"

    follow_up = [
        {"role": "user", "content": "weather in Oslo"},
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tool_use.id, "content": "-3C and snow"},
        ]},
    ]  # fmt: skip
    second = await client.messages.create(
        model="chat-large",
        max_tokens=100,
        messages=follow_up,
        tools=[WEATHER_TOOL],  # type: ignore[arg-type,list-item]
    )
    assert second.stop_reason == "end_turn"
    sent = engine.last_request.body["messages"]
    assert sent[1]["tool_calls"][0]["id"] == tool_use.id
    assert sent[1]["tool_calls"][0]["function"]["name"] == "weather"
    assert sent[2] == {"role": "tool", "tool_call_id": tool_use.id, "content": "-3C and snow"}


async def test_a_streamed_tool_call_over_an_openai_channel(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(tools=True)
    async with gateway.claude(key).messages.stream(
        model="chat-large",
        max_tokens=100,
        messages=[{"role": "user", "content": "weather in Oslo"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use"
    tool_use = final.content[-1]
    assert tool_use.type == "tool_use"
    assert tool_use.input == {"query": "echo: weather in Oslo"}


async def test_thinking_asks_an_openai_upstream_for_reasoning(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    await gateway.claude(key).messages.create(
        model="chat-large",
        max_tokens=5000,
        messages=HELLO,
        thinking={"type": "enabled", "budget_tokens": 4000},
        stop_sequences=["END"],
        extra_body={"temperature": 1.0, "top_k": 20},  # sampling is not in this SDK's signature
        metadata={"user_id": "user-7"},
    )
    sent = engine.last_request.body
    assert sent["reasoning_effort"] == "medium"
    assert (sent["top_k"], sent["stop"], sent["user"]) == (20, ["END"], "user-7")


async def test_count_tokens_is_parleys_estimate(gateway: Gateway, key: str) -> None:
    counted = await gateway.claude(key).messages.count_tokens(
        model="chat-large", messages=[{"role": "user", "content": "abcdefgh"}]
    )
    assert counted.input_tokens == 3 + 4 + 2


async def test_a_refused_field_is_named_once(gateway: Gateway, key: str) -> None:
    """Anthropic's shape has no ``param``: the message starts with the field, as
    Anthropic's own do (``temperature: ...``), without naming it twice."""
    body = {"model": "chat-large", "max_tokens": 5, "temperature": 3, "messages": HELLO}
    status, reply = await call(
        gateway, "POST", "/v1/messages", None, json=body, headers={"x-api-key": key}
    )
    assert status == 400
    assert reply["error"]["message"] == "temperature: must be between 0 and 1; got 3."


class Person(BaseModel):
    name: str
    age: int


async def test_the_newest_sdks_parameters_over_an_openai_channel(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    """``messages.parse(output_format=...)`` and ``output_config.effort`` are translated;
    the service tier goes to OpenAI's tiers; what only Anthropic's servers act on
    (``cache_control`` at the top as on a block, ``inference_geo``, ``speed``) is taken
    and not sent on."""
    parsed = await gateway.claude(key).messages.parse(
        model="chat-large",
        max_tokens=100,
        messages=[{"role": "user", "content": '{"name": "Ada", "age": 36}'}],
        output_format=Person,
        output_config={"effort": "low"},
        service_tier="standard_only",
        speed="fast",
    )
    assert parsed.parsed_output == Person(name="Ada", age=36)
    sent = engine.last_request.body
    assert sent["response_format"]["type"] == "json_schema"
    schema = sent["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"name", "age"}
    assert (sent["reasoning_effort"], sent["service_tier"]) == ("low", "default")
    assert not {"speed", "output_config"} & set(sent)
    cached = {"type": "ephemeral", "ttl": "1h"}
    await gateway.claude(key).messages.create(
        model="chat-large",
        max_tokens=100,
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": cached}]}
        ],
        cache_control=cached,
        inference_geo="us",
        output_config={"effort": "max"},
        thinking={"type": "adaptive"},
    )
    sent = engine.last_request.body
    assert sent["reasoning_effort"] == "high"
    assert sent["messages"] == [{"role": "user", "content": "hi"}]
    assert not {"cache_control", "inference_geo", "service_tier"} & set(sent)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"output_config": {"format": {"type": "xml"}}}, "output_config.format"),
        ({"output_config": {"effort": "extreme"}}, "output_config.effort"),
        ({"output_config": {"verbosity": 1}}, "output_config.verbosity"),
        ({"service_tier": "priority"}, "service_tier"),
        ({"temperature": 1.5}, "temperature"),
        ({"top_p": 2}, "top_p"),
    ],
)
async def test_what_the_newest_parameters_cannot_be_is_a_400(
    gateway: Gateway, key: str, extra: dict[str, Any], param: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as refused:
        await gateway.claude(key).messages.create(
            model="chat-large", max_tokens=5, messages=HELLO, extra_body=extra
        )
    assert refused.value.body["error"]["message"].startswith(f"{param}: ")  # type: ignore[index]


@pytest.mark.parametrize("messages", [None, [], "hello", {"role": "user"}, -2.5e53])
async def test_count_tokens_needs_messages(gateway: Gateway, key: str, messages: Any) -> None:
    """As Anthropic's own endpoint: no count for a body without a conversation."""
    body: dict[str, Any] = {"model": "chat-large"}
    if messages is not None:
        body["messages"] = messages
    status, reply = await call(
        gateway, "POST", "/v1/messages/count_tokens", None, json=body, headers={"x-api-key": key}
    )
    assert status == 400
    assert reply["type"] == "error" and reply["error"]["type"] == "invalid_request_error"
    assert reply["error"]["message"].startswith("messages: ")


async def test_x_api_key_authenticates(gateway: Gateway, key: str) -> None:
    body = {"model": "chat-large", "max_tokens": 10, "messages": HELLO}
    status, reply = await call(
        gateway, "POST", "/v1/messages", None, json=body, headers={"x-api-key": key}
    )
    assert status == 200 and reply["type"] == "message"


@pytest.mark.parametrize(
    ("headers", "kind"),
    [
        ({}, "authentication_error"),
        ({"x-api-key": "sk-wrong-key-0000000000"}, "authentication_error"),
    ],
)
async def test_authentication_errors_are_anthropic_shaped(
    gateway: Gateway, headers: dict[str, str], kind: str
) -> None:
    body = {"model": "chat-large", "max_tokens": 10, "messages": HELLO}
    status, reply = await call(gateway, "POST", "/v1/messages", None, json=body, headers=headers)
    assert status == 401
    assert reply["type"] == "error" and reply["error"]["type"] == kind
    assert reply["error"]["message"]


async def test_the_sdk_raises_anthropics_error_classes(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    client = gateway.claude(key)
    with pytest.raises(anthropic.NotFoundError) as missing:
        await client.messages.create(model="no-such-model", max_tokens=5, messages=HELLO)
    assert missing.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError) as bad:
        await client.messages.create(model="chat-large", max_tokens=0, messages=HELLO)
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError) as untranslatable:
        await client.messages.create(
            model="chat-large",
            max_tokens=5,
            messages=[{"role": "user", "content": [{"type": "document", "source": {}}]}],  # type: ignore[list-item]
        )
    assert "messages.0.content.0.type" in str(untranslatable.value)
    wrong = anthropic.AsyncAnthropic(base_url=gateway.base_url, api_key="sk-nope-000000000000")
    with pytest.raises(anthropic.AuthenticationError):
        await wrong.messages.create(model="chat-large", max_tokens=5, messages=HELLO)
    await wrong.close()
    engine.behaviour = Behaviour(fail=500)
    with pytest.raises(anthropic.InternalServerError) as upstream:
        await client.messages.create(model="chat-large", max_tokens=5, messages=HELLO)
    assert upstream.value.status_code == 502
    assert upstream.value.body["error"]["type"] == "api_error"  # type: ignore[index]


async def test_a_disabled_group_is_a_permission_error(gateway: Gateway) -> None:
    group = await gateway.group("off")
    key = await gateway.key(group)
    disabled = await gateway.services.store.set_group_disabled(group.name, datetime.now(UTC))
    gateway.services.directory.remember_group(disabled)
    with pytest.raises(anthropic.PermissionDeniedError) as refused:
        await gateway.claude(key).messages.create(model="chat-large", max_tokens=5, messages=HELLO)
    assert refused.value.body["error"]["type"] == "permission_error"  # type: ignore[index]


async def test_a_rate_limited_message_is_a_429_with_the_rate_headers(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("slow", rpm=1))
    client = gateway.claude(key)
    await client.messages.create(model="chat-large", max_tokens=5, messages=HELLO)
    with pytest.raises(anthropic.RateLimitError) as limited:
        await client.messages.create(model="chat-large", max_tokens=5, messages=HELLO)
    headers = limited.value.response.headers
    assert int(headers["retry-after"]) >= 1
    assert headers["x-ratelimit-limit-requests"] == "1"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert limited.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]


async def test_a_too_large_body_is_request_too_large(start_gateway: Any) -> None:
    gateway = await start_gateway(lambda config: config["server"].update(max_body_bytes=2000))
    key = await gateway.key(await gateway.group("team"))
    body = {
        "model": "chat-large",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x" * 5000}],
    }
    status, reply = await call(gateway, "POST", "/v1/messages", key, json=body)
    assert status == 413 and reply["error"]["type"] == "request_too_large"


async def test_a_group_sees_only_its_models(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("narrow", models=["vision-small"]))
    with pytest.raises(anthropic.NotFoundError):
        await gateway.claude(key).messages.create(model="chat-large", max_tokens=5, messages=HELLO)
    with pytest.raises(anthropic.NotFoundError):
        await gateway.claude(key).messages.count_tokens(model="chat-large", messages=HELLO)


async def test_messages_are_metered_exactly(gateway: Gateway, key: str) -> None:
    client = gateway.claude(key)
    await client.messages.create(model="chat-large", max_tokens=100, messages=HELLO)
    async with client.messages.stream(model="chat-large", max_tokens=100, messages=HELLO) as s:
        await s.get_final_message()
    found = sorted(await records(gateway), key=lambda record: record.created_at)
    price = Price(input_per_1k=usd_to_nanos("0.00001"), output_per_1k=usd_to_nanos("0.00003"))
    assert [r.endpoint for r in found] == ["/v1/messages", "/v1/messages"]
    for record in found:
        assert (record.status, record.channel, record.model) == (200, "engine", "chat-large")
        assert (record.prompt_tokens, record.completion_tokens) == (2, 3)
        assert not record.estimated
        assert record.cost_nanos == price.cost(prompt_tokens=2, completion_tokens=3)


async def test_signed_thinking_in_history_is_not_sent_to_an_openai_upstream(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    """Claude's signed thinking goes back only to an adapter that reads it (Bedrock's);
    an OpenAI-compatible upstream may refuse ``thinking_blocks``, so it never gets them."""
    history: Any = [
        *HELLO,
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "c2lnbmVk"},
            {"type": "redacted_thinking", "data": "c2VjcmV0"},
            {"type": "text", "text": "Hi."},
        ]},
        {"role": "user", "content": "And now?"},
    ]  # fmt: skip
    await gateway.claude(key).messages.create(
        model="chat-large",
        max_tokens=5000,
        messages=history,
        thinking={"type": "enabled", "budget_tokens": 4000},
    )
    sent = engine.last_request.body
    assert sent["messages"][1] == {"role": "assistant", "content": "Hi."}
