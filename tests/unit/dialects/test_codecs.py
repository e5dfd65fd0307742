"""The codecs between each dialect and the canonical call: what each field becomes, and
the 400 (``Unsupported``, naming the field) for what a target dialect cannot say."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from parley.dialects import (
    anthropic_messages,
    anthropic_messages_reply,
    openai_chat,
    openai_chat_reply,
    openai_responses,
)
from parley.dialects.call import ANTHROPIC_MESSAGES, ChatCall
from parley.dialects.canonical import (
    Image,
    Message,
    Reasoning,
    Request,
    ResponseFormat,
    Text,
    Thinking,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
    Unsupported,
)
from parley.domain.usage import Usage
from parley.providers.base import Target
from parley.providers.openai.adapter import chat_body

CLAUDE_BODY: dict[str, Any] = {
    "model": "claude",
    "max_tokens": 300,
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "Weather?"},
            {"type": "image",
             "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "need a tool", "signature": "sig=="},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3C"},
            {"type": "text", "text": "And tomorrow?"},
        ]},
    ],
    "tools": [{"name": "weather", "description": "Weather now",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    "stop_sequences": ["END"],
    "temperature": 0.5,
    "top_p": 0.9,
    "top_k": 40,
    "metadata": {"user_id": "u-1"},
    "thinking": {"type": "enabled", "budget_tokens": 2000},
    "stream": True,
}  # fmt: skip


def test_a_messages_body_reads_into_the_canonical_call() -> None:
    request = anthropic_messages.decode_request(CLAUDE_BODY)
    assert request.instructions == (Text("Be brief.", {"type": "ephemeral"}),)
    user, assistant, results = request.messages
    assert user.blocks == (Text("Weather?"), Image(media_type="image/png", data="iVBO"))
    assert assistant.blocks == (
        Reasoning("need a tool", signature="sig=="),
        ToolCall("toolu_1", "weather", '{"city":"Oslo"}'),
    )
    assert results.blocks == (ToolResult("toolu_1", (Text("-3C"),)), Text("And tomorrow?"))
    assert request.tool_choice is not None and request.tool_choice.mode == "required"
    assert request.tool_choice.parallel is False
    assert (request.max_output_tokens, request.top_k, request.user) == (300, 40, "u-1")


def test_each_messages_field_lands_in_its_own_request_field() -> None:
    """``decode_request`` builds the ``Request`` positionally: every field is pinned here
    against one built by name, and a body of the few common fields leaves the rest unset."""
    schema = {"type": "object"}
    body = {
        "model": "claude",
        "max_tokens": 300,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": [{"name": "weather", "input_schema": schema}],
        "tool_choice": {"type": "tool", "name": "weather"},
        "temperature": 0.25,
        "top_p": 0.75,
        "top_k": 40,
        "stop_sequences": ["END"],
        "output_config": {"format": {"type": "json_schema", "schema": schema}, "effort": "low"},
        "metadata": {"user_id": "u-1"},
        "stream": True,
        "service_tier": "standard_only",
    }
    assert anthropic_messages.decode_request(body) == Request(
        model="claude",
        messages=(Message("user", (Text("Hi"),)),),
        instructions=(Text("Be brief."),),
        tools=(Tool("weather", None, schema),),
        tool_choice=ToolChoice("tool", "weather"),
        max_output_tokens=300,
        temperature=0.25,
        top_p=0.75,
        top_k=40,
        stop=("END",),
        response_format=ResponseFormat("json_schema", {"name": "output", "schema": schema}),
        thinking=Thinking(enabled=True, budget_tokens=2048),
        user="u-1",
        stream=True,
        service_tier="default",
    )
    plain = {"model": "claude", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}
    assert anthropic_messages.decode_request(plain) == Request(
        model="claude", messages=(Message("user", (Text("Hi"),)),), max_output_tokens=8
    )


def test_each_responses_field_lands_in_its_own_request_field() -> None:
    """Responses' ``decode_request`` builds the ``Request`` positionally too: every field
    it reads is pinned against one built by name, and a body of only its input leaves the
    rest unset."""
    schema = {"type": "object"}
    body = {
        "model": "gpt",
        "instructions": "Be brief.",
        "input": "Hi",
        "tools": [{"type": "function", "name": "weather", "parameters": schema}],
        "tool_choice": {"type": "function", "name": "weather"},
        "parallel_tool_calls": False,
        "max_output_tokens": 300,
        "temperature": 0.25,
        "top_p": 0.75,
        "text": {"format": {"type": "json_object"}},
        "reasoning": {"effort": "low"},
        "user": "u-1",
        "stream": True,
    }
    assert responses_request(body) == Request(
        model="gpt",
        messages=(Message("user", (Text("Hi"),)),),
        instructions=(Text("Be brief."),),
        tools=(Tool("weather", None, schema),),
        tool_choice=ToolChoice("tool", "weather", parallel=False),
        max_output_tokens=300,
        temperature=0.25,
        top_p=0.75,
        response_format=ResponseFormat("json_object"),
        thinking=Thinking(enabled=True, budget_tokens=2048),
        user="u-1",
        stream=True,
    )
    assert responses_request({"model": "gpt", "input": "Hi"}) == Request(
        model="gpt", messages=(Message("user", (Text("Hi"),)),)
    )
    only_parallel = responses_request({"model": "gpt", "input": "Hi", "parallel_tool_calls": True})
    assert only_parallel.tool_choice == ToolChoice("auto", parallel=True)


def responses_request(body: dict[str, Any]) -> Request:
    return openai_responses.decode_request(body, openai_responses.normalized_input(body["input"]))


PLAIN = {"model": "claude", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}
TURNS = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": ""},
    {"role": "user", "content": "again", "extra": 1},
]


@pytest.mark.parametrize(
    "body",
    [PLAIN, {**PLAIN, "stream": True}, {**PLAIN, "stream": False}, {**PLAIN, "messages": TURNS}],
)
def test_a_plain_messages_body_is_written_straight_as_the_long_way_writes_it(
    body: dict[str, Any],
) -> None:
    straight = anthropic_messages.plain_chat_body(body, "gpt-up")
    long_way = openai_chat.encode_request(anthropic_messages.decode_request(body), "gpt-up")
    assert straight is not None
    assert orjson.dumps(straight) == orjson.dumps(long_way)


@pytest.mark.parametrize(
    "change",
    [
        {"system": "Be brief."},
        {"temperature": 0.5},
        {"metadata": {"user_id": "u-1"}},
        {"model": ""},
        {"max_tokens": True},
        {"max_tokens": 0},
        {"messages": []},
        {"messages": ["Hi"]},
        {"messages": [{"role": "system", "content": "Hi"}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]},
    ],
)
def test_any_other_messages_body_goes_the_long_way(change: dict[str, Any]) -> None:
    assert anthropic_messages.plain_chat_body({**PLAIN, **change}, "gpt-up") is None


def test_a_messages_body_becomes_an_openai_chat_body() -> None:
    body = openai_chat.encode_request(anthropic_messages.decode_request(CLAUDE_BODY), "gpt-up")
    assert body["model"] == "gpt-up"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "Weather?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
        ]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
        ]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "-3C"},
        {"role": "user", "content": "And tomorrow?"},
    ]  # fmt: skip
    assert body["tools"] == [
        {"type": "function", "function": {
            "name": "weather", "description": "Weather now",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    ]  # fmt: skip
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    assert body["stop"] == ["END"] and body["max_tokens"] == 300
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.5, 0.9, 40)
    assert body["user"] == "u-1" and body["reasoning_effort"] == "low"
    assert body["stream"] is True


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": 1.5}, "temperature"),
        ({"messages": [{"role": "system", "content": "x"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": [{"type": "document"}]}]},
         "messages.0.content.0.type"),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools.0"),
        ({"container": "c-1"}, "container"),
        ({"metadata": {"tier": "gold"}}, "metadata.tier"),
        ({"top_p": -0.5}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"service_tier": "priority"}, "service_tier"),
        ({"output_config": {"effort": "extreme"}}, "output_config.effort"),
        ({"thinking": {"type": "enabled"}}, "thinking"),
    ],
)  # fmt: skip
def test_what_cannot_be_translated_is_refused_by_name(change: dict[str, Any], param: str) -> None:
    with pytest.raises(Unsupported) as refused:
        anthropic_messages.decode_request({**CLAUDE_BODY, **change})
    assert refused.value.param == param


def test_an_openai_reply_becomes_a_message() -> None:
    reply = openai_chat_reply.decode_reply(
        {
            "id": "chatcmpl-9",
            "model": "up",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Checking.",
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}],
            }}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58,
                      "prompt_tokens_details": {"cached_tokens": 32}},
        }
    )  # fmt: skip
    assert reply.usage == Usage(prompt_tokens=50, completion_tokens=8, cached_tokens=32)
    message = anthropic_messages_reply.encode_reply(reply, reply.usage)
    assert message["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Oslo"}},
    ]
    assert message["stop_reason"] == "tool_use"
    assert message["usage"] == {
        "input_tokens": 18,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 32,
        "output_tokens": 8,
    }


OPENAI_BODY: dict[str, Any] = {
    "model": "chat",
    "messages": [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": [
            {"type": "text", "text": "Look"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
        ]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "f", "arguments": '{"a":1}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "f"}},
    "stop": "STOP",
    "user": "u-2",
    "n": 1,
    "stream": True,
    "stream_options": {"include_usage": True},
}  # fmt: skip


def test_an_openai_body_becomes_a_messages_body() -> None:
    request = openai_chat.decode_request(OPENAI_BODY)
    body = anthropic_messages.encode_request(request, "claude-up", 1024)
    assert body["model"] == "claude-up" and body["max_tokens"] == 1024
    assert body["system"] == [{"type": "text", "text": "Rules."}]
    assert body["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "Look"},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                         "data": "/9j/"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1",
             "content": [{"type": "text", "text": "ok"}]}]},
    ]  # fmt: skip
    assert body["tools"] == [{"name": "f", "input_schema": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "tool", "name": "f"}
    assert body["stop_sequences"] == ["STOP"]
    assert body["metadata"] == {"user_id": "u-2"}


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"temperature": 1.7}, "temperature"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
         "messages[0].content[0].type"),
    ],
)  # fmt: skip
def test_what_messages_cannot_say_is_refused_by_name(change: dict[str, Any], param: str) -> None:
    with pytest.raises(Unsupported) as refused:
        request = openai_chat.decode_request({**OPENAI_BODY, **change})
        anthropic_messages.encode_request(request, "claude-up", 1024)
    assert refused.value.param == param


def test_a_message_becomes_an_openai_reply() -> None:
    reply = anthropic_messages_reply.decode_reply(
        {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-up",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "Hi"},
                {"type": "tool_use", "id": "toolu_2", "name": "f", "input": {"b": [1]}},
            ],
            "stop_reason": "max_tokens", "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 10,
                      "cache_creation_input_tokens": 6},
        }
    )  # fmt: skip
    written = openai_chat_reply.encode_reply(reply, created=1)
    message = written["choices"][0]["message"]
    assert message["content"] == "Hi" and message["reasoning_content"] == "hm"
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"b":[1]}'}
    assert written["choices"][0]["finish_reason"] == "length"
    assert written["usage"] == {
        "prompt_tokens": 19, "completion_tokens": 4, "total_tokens": 23,
        "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 6},
    }  # fmt: skip


def test_the_openai_adapter_reads_only_a_body_it_cannot_write_straight() -> None:
    target = Target("c", "http://up/v1", None, "gpt-up", 1.0, 1.0)
    decoded: list[Any] = []

    def decode(body: Any) -> Request:
        decoded.append(body)
        return anthropic_messages.decode_request(body)

    assert chat_body(target, ChatCall(ANTHROPIC_MESSAGES, PLAIN, decode)) == {
        "model": "gpt-up",
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 64,
    }
    assert decoded == []  # written straight
    system = {**PLAIN, "system": "Be brief."}
    written = chat_body(target, ChatCall(ANTHROPIC_MESSAGES, system, decode))
    assert decoded == [system]
    assert written["messages"][0] == {"role": "system", "content": "Be brief."}
