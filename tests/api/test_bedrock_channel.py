"""A channel of ``type: bedrock``: OpenAI chat and completion callers (the official
``openai`` SDK) and Messages callers (the ``anthropic`` SDK) translated to Bedrock's
Converse API, every request SigV4-signed and verified by the fake, event-stream frames
read, errors mapped, throttled models fallen over, cached tokens billed exactly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import botocore.session
import openai
import orjson
import pytest
from botocore.validate import validate_parameters

from parley.domain.pricing import Price, usd_to_nanos
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
from tests.upstreams.bedrock import REDACTED, SIGNATURE, AwsKeys, Behaviour, FakeBedrock

KEYS = AwsKeys("ASIAFAKEACCESS01", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYfake", "FwoGZXIvYXdzEJr//fake=")
MODEL_ID = "anthropic.claude-3-5-sonnet-20240620-v1:0"
HELLO = [{"role": "user", "content": "hello there"}]
DOCUMENT = "x" * 1500
DOWN = "fail-ServiceUnavailableException"
PRICES = {
    "input_per_1k": "0.003",
    "output_per_1k": "0.015",
    "cached_input_per_1k": "0.0003",
    "cache_write_per_1k": "0.00375",
}


def bedrock_config(endpoint: str, backup_url: str, workdir: Path) -> dict[str, Any]:
    aws = {
        "region": "us-east-1",
        "access_key_id": KEYS.access_key_id,
        "secret_access_key": KEYS.secret_access_key,
        "session_token": KEYS.session_token,
    }
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "aws",
                "type": "bedrock",
                "base_url": endpoint,
                "aws": aws,
                "models": [
                    {"name": "claude-bedrock", "upstream": MODEL_ID},
                    {"name": "bedrock-cached", "upstream": f"{MODEL_ID}+cache-1000-200"},
                    {"name": "bedrock-busy", "upstream": f"{MODEL_ID}+fail-ThrottlingException"},
                    {"name": "bedrock-stalls", "upstream": f"{MODEL_ID}+throttle-after-0"},
                    {"name": "bedrock-down", "upstream": f"{MODEL_ID}+{DOWN}"},
                ],
                "priority": 1,
                "timeouts": {"connect": 2, "read": 5},
            },
            {
                "name": "aws-tool-json",
                "type": "bedrock",
                "base_url": endpoint,
                "aws": {**aws, "structured_output": "tool"},
                "models": [{"name": "bedrock-older", "upstream": MODEL_ID}],
                "timeouts": {"connect": 2, "read": 5},
            },
            {
                "name": "backup",
                "base_url": backup_url,
                "models": [
                    {"name": "bedrock-busy", "upstream": "backup-chat"},
                    {"name": "bedrock-stalls", "upstream": "backup-chat"},
                ],
                "timeouts": {"connect": 2, "read": 5},
            },
        ],
        "models": [
            {"name": "claude-bedrock", "vision": True,
             "prices": {"input_per_1k": "0.003", "output_per_1k": "0.015"}},
            {"name": "bedrock-cached", "prices": PRICES},
            {"name": "bedrock-busy"},
            {"name": "bedrock-stalls"},
            {"name": "bedrock-down"},
            {"name": "bedrock-older", "prices": {"input_per_1k": "0.003",
                                                 "output_per_1k": "0.015"}},
        ],
    }  # fmt: skip


@pytest.fixture
async def upstream() -> AsyncIterator[FakeBedrock]:
    async with FakeBedrock(credentials=KEYS, region="us-east-1") as running:
        yield running


@pytest.fixture
async def gateway(upstream: FakeBedrock, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with with_backup(
        lambda backup: bedrock_config(upstream.endpoint, backup, tmp_path)
    ) as gateway:
        yield gateway


async def test_a_chat_call_reaches_bedrock_signed(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    reply = await gateway.client(key).chat.completions.create(
        model="claude-bedrock",
        messages=[{"role": "system", "content": "Be brief."}, *HELLO],  # type: ignore[list-item]
        stop=["END"],
        max_tokens=50,
        temperature=0.5,
        top_p=0.9,
    )
    assert reply.choices[0].message.content == "echo: hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "claude-bedrock" and reply.id.startswith("chatcmpl-")
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (4, 3)
    assert upstream.raw_paths[-1] == "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
    sent = upstream.last_request
    assert sent.headers["X-Amz-Security-Token"] == KEYS.session_token
    assert sent.headers["Authorization"].startswith(
        f"AWS4-HMAC-SHA256 Credential={KEYS.access_key_id}/"
    )
    assert sent.body == {
        "messages": [{"role": "user", "content": [{"text": "hello there"}]}],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 50, "temperature": 0.5, "topP": 0.9,
                            "stopSequences": ["END"]},
    }  # fmt: skip
    found = await records(gateway)
    assert [(r.channel, r.prompt_tokens, r.completion_tokens) for r in found] == [("aws", 4, 3)]
    assert found[0].cost_nanos == 4 * 3000 + 3 * 15000


async def test_a_streamed_chat_call_reads_event_stream_frames(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    upstream.behaviour = Behaviour(reasoning=True)
    chunks = await usage_stream(gateway, key, HELLO, model="claude-bedrock")
    text = streamed_text(chunks)
    assert text == "echo: hello there"
    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    assert reasoning == "I should echo."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert all(c.model == "claude-bedrock" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (2, 6)
    assert upstream.raw_paths[-1].endswith("%3A0/converse-stream")
    (record,) = await records(gateway)
    assert (record.prompt_tokens, record.completion_tokens) == (2, 6)


async def test_tools_and_images_round_trip_through_bedrock(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    upstream.behaviour = Behaviour(tool=True)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look it up",
                "parameters": {"type": "object"},
            },
        }
    ]
    client = gateway.client(key)
    first = await client.chat.completions.create(
        model="claude-bedrock",
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ]}],  # type: ignore[list-item]
        tools=tools,  # type: ignore[arg-type]
        tool_choice="required",
    )  # fmt: skip
    assert first.choices[0].finish_reason == "tool_calls"
    (tool_call,) = first.choices[0].message.tool_calls or []
    assert tool_call.function.name == "lookup"  # type: ignore[union-attr]
    assert orjson.loads(tool_call.function.arguments) == {"query": "echo: what is this"}  # type: ignore[union-attr]
    sent = upstream.last_request.body
    assert sent["messages"][0]["content"][1] == {
        "image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}
    }
    assert sent["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "lookup", "description": "Look it up",
                                "inputSchema": {"json": {"type": "object"}}}}],
        "toolChoice": {"any": {}},
    }  # fmt: skip

    history = [
        {"role": "user", "content": "what is this"},
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": tool_call.id, "content": "a cat"},
    ]
    second = await client.chat.completions.create(
        model="claude-bedrock",
        messages=history,
        tools=tools,  # type: ignore[arg-type]
    )
    assert second.choices[0].finish_reason == "stop"
    sent_messages = upstream.last_request.body["messages"]
    use = {"toolUseId": tool_call.id, "name": "lookup", "input": {"query": "echo: what is this"}}
    assert sent_messages[1]["content"][-1] == {"toolUse": use}
    assert sent_messages[2] == {"role": "user", "content": [{"toolResult": {
        "toolUseId": tool_call.id, "content": [{"text": "a cat"}]}}]}  # fmt: skip

    stream = await client.chat.completions.create(
        model="claude-bedrock",
        messages=HELLO,
        tools=tools,
        stream=True,  # type: ignore[arg-type]
    )
    chunks = [chunk async for chunk in stream]
    calls = [
        c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls
    ]
    assert calls[0][0].function.name == "lookup"  # type: ignore[index, union-attr]
    arguments = "".join(call[0].function.arguments or "" for call in calls)  # type: ignore[index, union-attr]
    assert orjson.loads(arguments) == {"query": "echo: hello there"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


async def test_what_converse_cannot_say_is_a_400_naming_the_field(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    link = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]}]  # fmt: skip
    for field, value in (
        ("messages", link),
        ("n", 2),
    ):
        request: dict[str, Any] = {"model": "claude-bedrock", "messages": HELLO, field: value}
        with pytest.raises(openai.BadRequestError) as refused:
            await gateway.client(key).chat.completions.create(**request)
        assert refused.value.body["param"] == field  # type: ignore[index]
    assert upstream.requests == []  # refused before anything was sent


WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
    "additionalProperties": False,
}
FORECAST = {"name": "forecast", "schema": WEATHER, "strict": True}
JSON_TOOL = "parley_json_output"
LOOKUP = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}


def streamed_finish(chunks: list[Any]) -> str | None:
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    return finishes[-1]


async def test_a_json_schema_is_bedrocks_native_structured_output(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    client = gateway.client(key)
    ask = {"type": "json_schema", "json_schema": FORECAST}
    reply = await client.chat.completions.create(
        model="claude-bedrock",
        messages=HELLO,
        response_format=ask,  # type: ignore[arg-type]
    )
    answer = reply.choices[0].message
    assert orjson.loads(answer.content or "") == {"city": "echo: hello there", "days": 3}
    assert answer.tool_calls is None and reply.choices[0].finish_reason == "stop"
    sent = upstream.last_request.body
    assert sent["outputConfig"] == {"textFormat": {"type": "json_schema", "structure": {
        "jsonSchema": {"schema": orjson.dumps(WEATHER).decode(), "name": "forecast"}}}}  # fmt: skip
    assert "toolConfig" not in sent
    stream = await client.chat.completions.create(
        model="claude-bedrock",
        messages=HELLO,  # type: ignore[arg-type]
        response_format=ask,  # type: ignore[arg-type]
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    assert orjson.loads(streamed_text(chunks)) == {"city": "echo: hello there", "days": 3}
    assert streamed_finish(chunks) == "stop"
    # Native structured output goes with the caller's own tools: both are sent.
    await client.chat.completions.create(
        model="claude-bedrock",
        messages=HELLO,  # type: ignore[arg-type]
        response_format=ask,  # type: ignore[arg-type]
        tools=[LOOKUP],  # type: ignore[list-item]
    )
    sent = upstream.last_request.body
    assert "outputConfig" in sent
    assert [tool["toolSpec"]["name"] for tool in sent["toolConfig"]["tools"]] == ["lookup"]


async def test_json_object_forces_a_tool_whose_input_is_the_content(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    client = gateway.client(key)
    reply = await client.chat.completions.create(
        model="claude-bedrock",
        messages=HELLO,  # type: ignore[arg-type]
        response_format={"type": "json_object"},
    )
    answer = reply.choices[0].message
    assert answer.content == '{"echo":"echo: hello there"}'
    assert answer.tool_calls is None and reply.choices[0].finish_reason == "stop"
    sent = upstream.last_request.body
    assert sent["toolConfig"]["toolChoice"] == {"tool": {"name": JSON_TOOL}}
    (tool,) = sent["toolConfig"]["tools"]
    assert tool["toolSpec"]["name"] == JSON_TOOL
    assert tool["toolSpec"]["inputSchema"] == {"json": {"type": "object"}}
    assert "outputConfig" not in sent
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (2, 4)
    chunks = await client.chat.completions.create(
        model="claude-bedrock",
        messages=HELLO,  # type: ignore[arg-type]
        response_format={"type": "json_object"},
        stream=True,
        stream_options={"include_usage": True},
    )
    streamed = [chunk async for chunk in chunks]
    assert streamed_text(streamed) == '{"echo":"echo: hello there"}'
    assert not any(c.choices[0].delta.tool_calls for c in streamed if c.choices)
    assert streamed_finish(streamed) == "stop"
    usage = streamed[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (2, 4)
    found = await records(gateway)
    assert [(r.prompt_tokens, r.completion_tokens, r.estimated) for r in found] == [
        (2, 4, False),
        (2, 4, False),
    ]
    assert [r.cost_nanos for r in found] == [2 * 3000 + 4 * 15000] * 2


async def test_a_tool_channel_carries_a_json_schema_in_a_forced_tool(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    client = gateway.client(key)
    ask = {"type": "json_schema", "json_schema": FORECAST}
    reply = await client.chat.completions.create(
        model="bedrock-older",
        messages=HELLO,
        response_format=ask,  # type: ignore[arg-type]
    )
    assert orjson.loads(reply.choices[0].message.content or "") == {
        "city": "echo: hello there",
        "days": 3,
    }
    assert reply.choices[0].finish_reason == "stop"
    sent = upstream.last_request.body
    assert "outputConfig" not in sent
    assert sent["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {"json": WEATHER}
    assert sent["toolConfig"]["toolChoice"] == {"tool": {"name": JSON_TOOL}}
    stream = await client.chat.completions.create(
        model="bedrock-older",
        messages=HELLO,  # type: ignore[arg-type]
        response_format=ask,  # type: ignore[arg-type]
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    assert orjson.loads(streamed_text(chunks)) == {"city": "echo: hello there", "days": 3}
    assert streamed_finish(chunks) == "stop"
    # A forced tool would shut the caller's tools out, and a tool's input is an object.
    count = len(upstream.requests)
    for model, response_format in (
        ("claude-bedrock", {"type": "json_object"}),
        ("bedrock-older", ask),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model=model,
                messages=HELLO,  # type: ignore[arg-type]
                response_format=response_format,  # type: ignore[arg-type]
                tools=[LOOKUP],  # type: ignore[list-item]
            )
        assert refused.value.body["param"] == "response_format"  # type: ignore[index]
    listed = {"name": "list", "schema": {"type": "array", "items": {"type": "string"}}}
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="bedrock-older",
            messages=HELLO,  # type: ignore[arg-type]
            response_format={"type": "json_schema", "json_schema": listed},  # type: ignore[typeddict-item]
        )
    assert refused.value.body["param"] == "response_format"  # type: ignore[index]
    assert len(upstream.requests) == count  # refused before anything was sent


async def test_bedrock_errors_map_to_the_envelope(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    client = gateway.client(key)
    upstream.behaviour = Behaviour(fail="ValidationException")
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="claude-bedrock", messages=HELLO)  # type: ignore[arg-type]
    assert refused.value.body["message"] == "Fake failure (ValidationException)."  # type: ignore[index]
    assert refused.value.body["code"] == "ValidationException"  # type: ignore[index]
    for name in (
        "AccessDeniedException",
        "InternalServerException",
        "ModelErrorException",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "ThrottlingException",
    ):
        upstream.behaviour = Behaviour(fail=name)
        with pytest.raises(openai.APIStatusError) as failed:
            await client.chat.completions.create(model="claude-bedrock", messages=HELLO)  # type: ignore[arg-type]
        assert failed.value.status_code == 502, name
        assert "`aws`" in str(failed.value.body)
    with pytest.raises(openai.APIStatusError) as down:
        await client.chat.completions.create(model="bedrock-down", messages=HELLO)  # type: ignore[arg-type]
    assert down.value.status_code == 502


async def test_a_throttled_bedrock_model_fails_over(gateway: Gateway, key: str) -> None:
    reply = await gateway.client(key).chat.completions.create(model="bedrock-busy", messages=HELLO)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "echo: hello there"  # from the backup
    stream = await gateway.client(key).chat.completions.create(
        model="bedrock-stalls",
        messages=HELLO,
        stream=True,  # type: ignore[arg-type]
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "echo: hello there"  # a throttlingException before the first event
    found = await records(gateway)
    assert {record.channel for record in found} == {"backup"}


async def test_a_wrong_secret_is_refused_by_the_signature_check(
    upstream: FakeBedrock, tmp_path: Path
) -> None:
    def config() -> dict[str, Any]:
        settings = bedrock_config(upstream.endpoint, "http://127.0.0.1:9", tmp_path)
        settings["channels"][0]["aws"]["secret_access_key"] = "not/the/secret"
        return settings

    async with starting(config) as start:
        gateway = await start()
        key = await gateway.key(await gateway.group("team"))
        with pytest.raises(openai.APIStatusError) as failed:
            await gateway.client(key).chat.completions.create(
                model="claude-bedrock",
                messages=HELLO,  # type: ignore[arg-type]
            )
    assert failed.value.status_code == 502
    assert "not/the/secret" not in str(failed.value.body)
    assert upstream.last_request.headers["Authorization"].startswith("AWS4-HMAC-SHA256")


async def test_stream_exceptions_and_broken_frames_end_the_stream(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    for behaviour in (Behaviour(exception_after=3), Behaviour(bad_crc=True)):
        upstream.behaviour = behaviour
        stream = await gateway.client(key).chat.completions.create(
            model="claude-bedrock",
            messages=HELLO,
            stream=True,  # type: ignore[arg-type]
        )
        with pytest.raises(openai.APIError):
            _ = [chunk async for chunk in stream]
    found = await records(gateway)
    assert sorted(record.status for record in found) == [502, 502]


async def test_a_guardrail_is_a_content_filter_finish(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    upstream.behaviour = Behaviour(guardrail=True)
    reply = await gateway.client(key).chat.completions.create(
        model="claude-bedrock", messages=HELLO
    )  # type: ignore[arg-type]
    assert reply.choices[0].finish_reason == "content_filter"
    message = await gateway.claude(key).messages.create(
        model="claude-bedrock",
        max_tokens=20,
        messages=HELLO,  # type: ignore[arg-type]
    )
    assert message.stop_reason == "refusal"
    async with gateway.claude(key).messages.stream(
        model="claude-bedrock",
        max_tokens=20,
        messages=HELLO,  # type: ignore[arg-type]
    ) as stream:
        assert (await stream.get_final_message()).stop_reason == "refusal"


async def test_bedrock_cached_tokens_are_billed_exactly(gateway: Gateway, key: str) -> None:
    messages = [{"role": "user", "content": f"hello {DOCUMENT}"}]
    reply = await gateway.client(key).chat.completions.create(
        model="bedrock-cached",
        messages=messages,  # type: ignore[arg-type]
    )
    assert reply.usage is not None and reply.usage.prompt_tokens == 2 + 1000 + 200
    assert reply.usage.prompt_tokens_details is not None
    assert reply.usage.prompt_tokens_details.cached_tokens == 1000
    stream = await gateway.client(key).chat.completions.create(
        model="bedrock-cached",
        messages=messages,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    last = [chunk async for chunk in stream][-1]
    assert last.usage is not None and last.usage.prompt_tokens == 1202
    price = Price(
        input_per_1k=usd_to_nanos("0.003"),
        output_per_1k=usd_to_nanos("0.015"),
        cached_input_per_1k=usd_to_nanos("0.0003"),
        cache_write_per_1k=usd_to_nanos("0.00375"),
    )
    found = await records(gateway)
    assert len(found) == 2
    for record in found:
        assert (record.cached_tokens, record.cache_write_tokens) == (1000, 200)
        assert record.cost_nanos == price.cost(
            prompt_tokens=1202, completion_tokens=3, cached_tokens=1000, cache_write_tokens=200
        )
        assert record.cost_nanos == 2 * 3000 + 1000 * 300 + 200 * 3750 + 3 * 15000


async def test_a_messages_caller_reaches_bedrock(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    upstream.behaviour = Behaviour(tool=True)
    message = await gateway.claude(key).messages.create(
        model="claude-bedrock",
        max_tokens=100,
        system="Be brief.",
        messages=HELLO,  # type: ignore[arg-type]
    )
    assert message.model == "claude-bedrock"
    assert message.content[0].text == "echo: hello there"  # type: ignore[union-attr]
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (4, 3)
    assert upstream.last_request.body["inferenceConfig"] == {"maxTokens": 100}

    async with gateway.claude(key).messages.stream(
        model="claude-bedrock",
        max_tokens=100,
        messages=HELLO,  # type: ignore[arg-type]
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
    ) as stream:
        final = await stream.get_final_message()
    assert [block.type for block in final.content] == ["text", "tool_use"]
    assert final.content[0].text == "echo: hello there"  # type: ignore[union-attr]
    assert final.content[1].input == {"query": "echo: hello there"}  # type: ignore[union-attr]
    assert final.stop_reason == "tool_use" and final.model == "claude-bedrock"
    assert upstream.raw_paths[-1].endswith("/converse-stream")


async def test_a_messages_callers_thinking_reaches_bedrock(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    upstream.behaviour = Behaviour(reasoning=True)
    async with gateway.claude(key).messages.stream(
        model="claude-bedrock",
        max_tokens=2000,
        messages=HELLO,  # type: ignore[arg-type]
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:
        final = await stream.get_final_message()
    assert final.content[0].type == "thinking"
    assert final.content[0].thinking == "I should echo."  # type: ignore[union-attr]
    sent = upstream.last_request.body
    assert sent["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024}
    }


CONVERSE = (
    botocore.session.get_session().get_service_model("bedrock-runtime").operation_model("Converse")
)
"""botocore's model of Converse: what the SDK itself would check a request against."""


def check_converse(body: dict[str, Any]) -> None:
    """Raise unless ``body`` (with the model id) is a Converse request botocore accepts."""
    validate_parameters({**body, "modelId": MODEL_ID}, CONVERSE.input_shape)


THOUGHT = {"reasoningContent": {"reasoningText": {"text": "I should echo.",
                                                  "signature": SIGNATURE}}}  # fmt: skip
HIDDEN = {"reasoningContent": {"redactedContent": REDACTED}}
CLAUDE_TOOLS = [{"name": "lookup", "input_schema": {"type": "object"}}]
THINKING = {"type": "enabled", "budget_tokens": 1024}


async def test_a_messages_callers_signed_thinking_goes_back_to_bedrock(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    upstream.behaviour = Behaviour(reasoning=True, redacted=True, tool=True)
    claude = gateway.claude(key)
    async with claude.messages.stream(
        model="claude-bedrock",
        max_tokens=2000,
        messages=HELLO,  # type: ignore[arg-type]
        tools=CLAUDE_TOOLS,  # type: ignore[arg-type]
        thinking=THINKING,  # type: ignore[arg-type]
    ) as stream:
        first = await stream.get_final_message()
    kinds = [block.type for block in first.content]
    assert kinds == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert first.content[0].signature == SIGNATURE  # type: ignore[union-attr]
    assert first.content[1].data == REDACTED  # type: ignore[union-attr]
    call = first.content[3]
    assert call.type == "tool_use"
    history = [
        *HELLO,
        {"role": "assistant",
         "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                      "content": "found"}]},
    ]  # fmt: skip
    second = await claude.messages.create(
        model="claude-bedrock",
        max_tokens=2000,
        messages=history,  # type: ignore[arg-type]
        tools=CLAUDE_TOOLS,  # type: ignore[arg-type]
        thinking=THINKING,  # type: ignore[arg-type]
    )
    assert second.stop_reason == "end_turn"
    assert second.content[0].type == "thinking"
    assert second.content[0].signature == SIGNATURE
    assert second.content[1].type == "redacted_thinking" and second.content[1].data == REDACTED
    sent = upstream.last_request.body
    check_converse(sent)
    assistant = sent["messages"][1]["content"]
    assert assistant[:2] == [THOUGHT, HIDDEN]
    assert [next(iter(block)) for block in assistant[2:]] == ["text", "toolUse"]


async def test_a_chat_caller_sends_thinking_blocks_back_to_bedrock(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    upstream.behaviour = Behaviour(reasoning=True, tool=True)
    client = gateway.client(key)
    tools = [LOOKUP]
    first = await client.chat.completions.create(
        model="claude-bedrock",
        messages=HELLO,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
        reasoning_effort="low",
    )
    message = first.choices[0].message
    signed = (message.model_extra or {})["thinking_blocks"]
    assert signed == [{"type": "thinking", "thinking": "I should echo.", "signature": SIGNATURE}]
    call = (message.tool_calls or [])[0]
    history = [
        *HELLO,
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "found"},
    ]
    await client.chat.completions.create(
        model="claude-bedrock",
        messages=history,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
        reasoning_effort="low",
    )
    sent = upstream.last_request.body
    check_converse(sent)
    assert sent["messages"][1]["content"][0] == THOUGHT


async def test_bedrock_errors_reach_a_messages_caller_in_its_shape(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    upstream.behaviour = Behaviour(fail="ValidationException")
    with pytest.raises(anthropic.BadRequestError) as refused:
        await gateway.claude(key).messages.create(
            model="claude-bedrock",
            max_tokens=5,
            messages=HELLO,  # type: ignore[arg-type]
        )
    assert refused.value.body["error"]["message"] == "Fake failure (ValidationException)."  # type: ignore[index]
    assert CHANNEL_KEY not in str(refused.value.body)


async def test_classic_completions_reach_bedrock(
    gateway: Gateway, key: str, upstream: FakeBedrock
) -> None:
    client = gateway.client(key)
    reply = await client.completions.create(model="claude-bedrock", prompt="hello there")
    assert reply.choices[0].text == "echo: hello there"
    assert reply.choices[0].finish_reason == "stop"
    stream = await client.completions.create(
        model="claude-bedrock", prompt="hello there", max_tokens=2, stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "echo: hello"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
