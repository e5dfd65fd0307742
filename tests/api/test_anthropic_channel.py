"""A channel of ``type: anthropic``: OpenAI chat callers translated (through the
official ``openai`` SDK), Messages callers passed through (through the ``anthropic``
SDK and raw HTTP), errors mapped, an overloaded upstream fallen over."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import orjson
import pytest

from tests.api.harness import (
    CHANNEL_KEY,
    Gateway,
    call,
    local_state,
    records,
    streamed_text,
    with_backup,
)
from tests.upstreams.anthropic import SIGNATURE, Behaviour, FakeAnthropic

HELLO = [{"role": "user", "content": "hello there"}]
EPHEMERAL = {"type": "ephemeral"}


def anthropic_config(upstream_url: str, backup_url: str, workdir: Path) -> dict[str, Any]:
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "claude",
                "type": "anthropic",
                "base_url": upstream_url,
                "api_key": CHANNEL_KEY,
                "models": [
                    {"name": "claude-large", "upstream": "claude-up"},
                    {"name": "claude-busy", "upstream": "claude-up+fail-529"},
                ],
                "priority": 1,
                "timeouts": {"connect": 2, "read": 5},
            },
            {
                "name": "backup",
                "base_url": backup_url,
                "models": [{"name": "claude-busy", "upstream": "backup-chat"}],
                "timeouts": {"connect": 2, "read": 5},
            },
        ],
        "models": [
            {
                "name": "claude-large",
                "vision": True,
                "prices": {"input_per_1k": "0.003", "output_per_1k": "0.015"},
            },
            {"name": "claude-busy"},
        ],
    }


@pytest.fixture
async def upstream() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def gateway(upstream: FakeAnthropic, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with with_backup(
        lambda backup: anthropic_config(upstream.base_url, backup, tmp_path)
    ) as gateway:
        yield gateway


async def test_an_openai_chat_call_reaches_an_anthropic_channel(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    reply = await gateway.client(key).chat.completions.create(
        model="claude-large",
        messages=[{"role": "system", "content": "Be brief."}, *HELLO],  # type: ignore[list-item]
        stop=["END"],
    )
    assert reply.choices[0].message.content == "echo: hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "claude-large" and reply.id.startswith("chatcmpl-")
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (4, 3)
    sent = upstream.last_request
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == CHANNEL_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in sent.headers
    assert sent.body == {
        "model": "claude-up",
        "max_tokens": 1024,  # limits.default_max_tokens, when the caller gave none
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}],
        "system": [{"type": "text", "text": "Be brief."}],
        "stop_sequences": ["END"],
    }


async def test_a_streamed_chat_call_to_an_anthropic_channel(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    upstream.behaviour = Behaviour(thinking=True)
    stream = await gateway.client(key).chat.completions.create(
        model="claude-large",
        messages=HELLO,  # type: ignore[arg-type]
        max_tokens=50,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = streamed_text(chunks)
    assert text == "echo: hello there"
    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    assert reasoning == "I should echo."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    assert all(c.model == "claude-large" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    usage = chunks[-1].usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (2, 6)
    assert upstream.last_request.body["stream"] is True
    assert upstream.last_request.body["max_tokens"] == 50


async def test_tools_and_images_translate_to_an_anthropic_channel(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    upstream.behaviour = Behaviour(tool=True)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    client = gateway.client(key)
    first = await client.chat.completions.create(
        model="claude-large",
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        ]}],  # type: ignore[list-item]
        tools=tools,  # type: ignore[arg-type]
        tool_choice="required",
    )  # fmt: skip
    assert first.choices[0].finish_reason == "tool_calls"
    (tool_call,) = first.choices[0].message.tool_calls or []
    assert tool_call.function.name == "lookup"  # type: ignore[union-attr]
    assert orjson.loads(tool_call.function.arguments) == {"query": "echo: what is this"}  # type: ignore[union-attr]
    sent = upstream.last_request.body
    assert sent["messages"][0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]  # fmt: skip
    assert sent["tools"] == [{"name": "lookup", "input_schema": {"type": "object"}}]
    assert sent["tool_choice"] == {"type": "any"}

    second = await client.chat.completions.create(
        model="claude-large",
        messages=[
            {"role": "user", "content": "what is this"},
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": tool_call.id, "content": "a cat"},
        ],  # type: ignore[list-item]
        tools=tools,  # type: ignore[arg-type]
    )
    assert second.choices[0].finish_reason == "stop"
    sent = upstream.last_request.body["messages"]
    assert sent[1]["content"][-1] == {
        "type": "tool_use", "id": tool_call.id, "name": "lookup",
        "input": {"query": "echo: what is this"},
    }  # fmt: skip
    assert sent[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": tool_call.id,
                     "content": [{"type": "text", "text": "a cat"}]}],
    }  # fmt: skip


async def test_what_messages_cannot_say_is_a_400_naming_the_field(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    before = len(upstream.requests)
    schema = {"name": "x", "schema": {"type": "object"}}
    for field, value in (
        ("response_format", {"type": "json_schema", "json_schema": schema}),
        ("n", 2),
        ("logprobs", True),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            await gateway.client(key).chat.completions.create(
                model="claude-large",
                messages=HELLO,
                **{field: value},  # type: ignore[arg-type]
            )
        assert refused.value.body["param"] == field  # type: ignore[index]
    assert len(upstream.requests) == before  # refused before anything was sent


async def test_a_passed_through_message_has_its_sampling_checked_as_translated_ones(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    before = len(upstream.requests)
    for extra in ({"temperature": 1.5}, {"top_p": 2}):
        with pytest.raises(anthropic.BadRequestError) as refused:
            await gateway.claude(key).messages.create(
                model="claude-large", max_tokens=5, messages=HELLO, extra_body=extra
            )
        (name,) = extra
        assert refused.value.body["error"]["message"].startswith(f"{name}: must be between 0")  # type: ignore[index]
    assert len(upstream.requests) == before  # refused before anything was sent


async def test_upstream_refusals_map_to_the_openai_envelope(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    upstream.behaviour = Behaviour(fail=400)
    with pytest.raises(openai.BadRequestError) as refused:
        await gateway.client(key).chat.completions.create(model="claude-large", messages=HELLO)  # type: ignore[arg-type]
    assert refused.value.body["message"] == "Fake failure (400)."  # type: ignore[index]
    assert refused.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    upstream.behaviour = Behaviour(fail=500)
    with pytest.raises(openai.APIStatusError) as failed:
        await gateway.client(key).chat.completions.create(model="claude-large", messages=HELLO)  # type: ignore[arg-type]
    assert failed.value.status_code == 502
    assert CHANNEL_KEY not in str(failed.value.body)


async def test_an_overloaded_anthropic_channel_fails_over_like_a_503(
    gateway: Gateway, key: str
) -> None:
    reply = await gateway.client(key).chat.completions.create(model="claude-busy", messages=HELLO)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "echo: hello there"  # from the backup
    message = await gateway.claude(key).messages.create(
        model="claude-busy", max_tokens=20, messages=HELLO
    )
    assert message.content[0].text == "echo: hello there"  # type: ignore[union-attr]
    found = await records(gateway)
    assert {record.channel for record in found} == {"backup"}


async def test_a_message_is_passed_through_to_an_anthropic_channel(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    upstream.behaviour = Behaviour(thinking=True)
    message = await gateway.claude(key).messages.create(
        model="claude-large",
        max_tokens=100,
        messages=HELLO,
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert message.model == "claude-large"
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.signature == SIGNATURE
    assert text.type == "text" and text.text == "echo: hello there"
    sent = upstream.last_request.body
    assert sent["model"] == "claude-up"
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 1024}

    said = [block.model_dump() for block in message.content]
    follow_up = [
        *HELLO,
        {"role": "assistant", "content": said},
        {"role": "user", "content": "and?"},
    ]
    await gateway.claude(key).messages.create(
        model="claude-large",
        max_tokens=100,
        messages=follow_up,  # type: ignore[arg-type]
    )
    resent = upstream.last_request.body["messages"][1]["content"][0]
    assert resent["signature"] == SIGNATURE and resent["thinking"] == "I should echo."


def claude_code_body() -> dict[str, Any]:
    """A request shaped like Claude Code's: many tools, system blocks with cache_control,
    metadata.user_id, streamed, and a field no one here knows."""
    tools = [
        {"name": f"tool_{n}", "description": f"Tool number {n}",
         "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                          "required": ["path"]}}
        for n in range(40)
    ]  # fmt: skip
    tools[-1]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "claude-large",
        "max_tokens": 32000,
        "system": [
            {"type": "text", "text": "You are Claude Code.", "cache_control": EPHEMERAL},
            {"type": "text", "text": "Be careful.", "cache_control": {**EPHEMERAL, "ttl": "1h"}},
        ],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "fix the bug", "cache_control": {"type": "ephemeral"}}]}],
        "tools": tools,
        "metadata": {"user_id": "user_abc_account_def_session_123"},
        "temperature": 1,
        "stream": True,
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
    }  # fmt: skip


async def test_a_claude_code_request_is_relayed_intact(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    body = claude_code_body()
    beta = "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/messages",
            data=orjson.dumps(body),
            headers={"x-api-key": key, "anthropic-version": "2023-06-01",
                     "anthropic-beta": beta, "Content-Type": "application/json"},
        ) as reply,
    ):  # fmt: skip
        assert reply.status == 200
        relayed = await reply.read()
    sent = upstream.last_request
    assert sent.body == {**body, "model": "claude-up"}
    assert sent.headers["anthropic-beta"] == beta
    assert sent.headers["x-api-key"] == CHANNEL_KEY
    assert relayed.startswith(b"event: message_start\ndata: ")
    assert b'"model":"claude-large"' in relayed and b"claude-up" not in relayed
    assert relayed.endswith(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


async def test_a_passed_through_stream_through_the_sdk(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    upstream.behaviour = Behaviour(thinking=True, tool=True)
    async with gateway.claude(key).messages.stream(
        model="claude-large",
        max_tokens=100,
        messages=HELLO,
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
    ) as stream:
        final = await stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[0].signature == SIGNATURE  # type: ignore[union-attr]
    assert final.content[2].input == {"query": "echo: hello there"}  # type: ignore[union-attr]
    assert final.stop_reason == "tool_use" and final.model == "claude-large"


async def test_count_tokens_asks_an_anthropic_channel(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    counted = await gateway.claude(key).messages.count_tokens(
        model="claude-large", messages=[{"role": "user", "content": "one two three four five"}]
    )
    assert counted.input_tokens == 5
    assert upstream.last_request.path == "/v1/messages/count_tokens"
    assert upstream.last_request.body["model"] == "claude-up"


async def test_a_stream_error_event_ends_the_callers_stream(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    upstream.behaviour = Behaviour(error_after=4)
    body = {"model": "claude-large", "max_tokens": 20, "messages": HELLO, "stream": True}
    status, text = await call(gateway, "POST", "/v1/messages", key, json=body)
    assert status == 200
    assert text.count("event: content_block_delta") == 1
    assert text.endswith(
        'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"The '
        'upstream channel `claude` failed during the stream (overloaded_error)."}}\n\n'
    )
    stream = await gateway.client(key).chat.completions.create(
        model="claude-large",
        messages=HELLO,
        stream=True,  # type: ignore[arg-type]
    )
    with pytest.raises(openai.APIError):
        _ = [chunk async for chunk in stream]
    found = await records(gateway)
    assert sorted(record.status for record in found) == [502, 502]


async def test_anthropic_errors_reach_a_messages_caller_in_its_shape(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    upstream.behaviour = Behaviour(fail=400)
    with pytest.raises(anthropic.BadRequestError) as refused:
        await gateway.claude(key).messages.create(
            model="claude-large", max_tokens=5, messages=HELLO
        )
    assert refused.value.body["error"] == {  # type: ignore[index]
        "type": "invalid_request_error", "message": "Fake failure (400).",
    }  # fmt: skip


async def test_classic_completions_reach_an_anthropic_channel(
    gateway: Gateway, key: str, upstream: FakeAnthropic
) -> None:
    client = gateway.client(key)
    reply = await client.completions.create(model="claude-large", prompt="hello there")
    assert reply.object == "text_completion" and reply.id.startswith("cmpl-")
    assert reply.choices[0].text == "echo: hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert upstream.last_request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello there"}]}
    ]
    stream = await client.completions.create(
        model="claude-large", prompt=["hello there"], max_tokens=2, stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "echo: hello"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert all(c.object == "text_completion" for c in chunks)
    for refused, param in (({"prompt": ["a", "b"]}, "prompt"), ({"echo": True}, "echo")):
        with pytest.raises(openai.BadRequestError) as error:
            await client.completions.create(model="claude-large", **{"prompt": "x", **refused})  # type: ignore[call-overload]
        assert error.value.body["param"] == param  # type: ignore[index]


@pytest.mark.parametrize(
    ("status", "error_class", "caller_status", "kind"),
    [
        (400, anthropic.BadRequestError, 400, "invalid_request_error"),
        (413, anthropic.APIStatusError, 413, "request_too_large"),
        (401, anthropic.InternalServerError, 502, "api_error"),
        (403, anthropic.InternalServerError, 502, "api_error"),
        (404, anthropic.InternalServerError, 502, "api_error"),
        (429, anthropic.InternalServerError, 502, "api_error"),
        (500, anthropic.InternalServerError, 502, "api_error"),
        (529, anthropic.InternalServerError, 502, "api_error"),
    ],
)
async def test_every_upstream_error_type_reaches_a_messages_caller(
    gateway: Gateway,
    key: str,
    upstream: FakeAnthropic,
    status: int,
    error_class: type[anthropic.APIStatusError],
    caller_status: int,
    kind: str,
) -> None:
    """The request's own faults are relayed; the channel's (its key, its quota, its
    outage, its overload) are a 502 naming only the channel, after any failover."""
    upstream.behaviour = Behaviour(fail=status)
    with pytest.raises(error_class) as failed:
        await gateway.claude(key).messages.create(
            model="claude-large", max_tokens=5, messages=HELLO
        )
    assert failed.value.status_code == caller_status
    assert failed.value.body["error"]["type"] == kind  # type: ignore[index]
    assert CHANNEL_KEY not in str(failed.value.body)
