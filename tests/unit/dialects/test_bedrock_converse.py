"""The Converse codec: the canonical call written as Bedrock's body, its replies and
usage read back, and what Converse cannot say refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from parley.dialects import anthropic_messages, bedrock_converse, openai_chat, openai_chat_reply
from parley.dialects.canonical import Reasoning, Text, ToolCall, Unsupported
from parley.domain.usage import Usage


def converse(body: dict[str, Any]) -> dict[str, Any]:
    return bedrock_converse.encode_request(openai_chat.decode_request(body))


def test_cache_control_becomes_cache_points_and_extras_go_to_the_model() -> None:
    request = anthropic_messages.decode_request(
        {
            "model": "m",
            "max_tokens": 64,
            "system": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "doc", "cache_control": {"type": "ephemeral"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                             "data": "AAAA"}},
            ]}],
            "tools": [{"name": "t", "input_schema": {"type": "object"},
                       "cache_control": {"type": "ephemeral"}}],
            "tool_choice": {"type": "tool", "name": "t"},
            "top_k": 5,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
        }
    )  # fmt: skip
    body = bedrock_converse.encode_request(request)
    point = {"cachePoint": {"type": "default"}}
    assert body["system"] == [{"text": "rules"}, point]
    assert body["messages"][0]["content"] == [
        {"text": "doc"}, point, {"image": {"format": "jpeg", "source": {"bytes": "AAAA"}}},
    ]  # fmt: skip
    assert body["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "t", "inputSchema": {"json": {"type": "object"}}}}, point],
        "toolChoice": {"tool": {"name": "t"}},
    }
    assert body["inferenceConfig"] == {"maxTokens": 64}
    assert body["additionalModelRequestFields"] == {
        "top_k": 5, "thinking": {"type": "enabled", "budget_tokens": 2048},
    }  # fmt: skip


TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
USED = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "done"},
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": USED, "tools": TOOLS, "tool_choice": "none"}, "tool_choice"),
        ({"messages": USED}, "tools"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": TOOLS,
          "parallel_tool_calls": False}, "parallel_tool_calls"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
            "url": "data:image/bmp;base64,AAAA"}}]}]}, "messages"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": TOOLS,
          "response_format": {"type": "json_object"}}, "response_format"),
    ],
)  # fmt: skip
def test_what_converse_cannot_say_names_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(Unsupported) as refused:
        converse(body)
    assert refused.value.param == param


def test_tool_choice_none_without_tool_history_leaves_the_tools_out() -> None:
    body = converse({"messages": [{"role": "user", "content": "x"}], "tools": TOOLS,
                     "tool_choice": "none", "user": "u1"})  # fmt: skip
    assert "toolConfig" not in body
    assert body == {"messages": [{"role": "user", "content": [{"text": "x"}]}]}


def test_a_tool_round_trip_is_written_as_tool_use_and_tool_result() -> None:
    body = converse({"messages": USED, "tools": TOOLS, "tool_choice": "auto"})
    assert body["messages"][1] == {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "c1", "name": "f", "input": {}}}]}  # fmt: skip
    assert body["messages"][2] == {"role": "user", "content": [
        {"toolResult": {"toolUseId": "c1", "content": [{"text": "done"}]}}]}  # fmt: skip
    assert body["toolConfig"]["toolChoice"] == {"auto": {}}


def test_a_reply_is_read_with_its_blocks_stop_reason_and_usage() -> None:
    reply = bedrock_converse.decode_reply(
        {
            "output": {"message": {"role": "assistant", "content": [
                {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "s"}}},
                {"text": "Hi"},
                {"toolUse": {"toolUseId": "t1", "name": "f", "input": {"a": 1}}},
            ]}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 4, "outputTokens": 6, "totalTokens": 40,
                      "cacheReadInputTokens": 20, "cacheWriteInputTokens": 10},
        },
        "model-id",
    )  # fmt: skip
    assert reply.blocks == (
        Reasoning("hm", signature="s"),
        Text("Hi"),
        ToolCall("t1", "f", '{"a":1}'),
    )
    assert reply.stop == "tool_calls" and reply.model == "model-id"
    assert reply.usage == Usage(
        prompt_tokens=34, completion_tokens=6, cached_tokens=20, cache_write_tokens=10
    )
    written = openai_chat_reply.encode_reply(reply)
    assert written["choices"][0]["finish_reason"] == "tool_calls"
    assert written["usage"]["prompt_tokens_details"] == {
        "cached_tokens": 20,
        "cache_write_tokens": 10,
    }


SIGNED_HISTORY = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "c2VjcmV0"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
    ]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
]  # fmt: skip


@pytest.mark.parametrize("signed", [True, False])
def test_a_messages_callers_signed_thinking_crosses_the_chat_body_to_converse(
    signed: bool,
) -> None:
    """The canonical call carries the signed thinking to Converse in one hop; a chat body
    (for an OpenAI-compatible upstream) says none of it."""
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    thinking = {"type": "enabled", "budget_tokens": 1024}
    body = {"model": "m", "max_tokens": 9, "messages": SIGNED_HISTORY, "tools": tools,
            "thinking": thinking}  # fmt: skip
    request = anthropic_messages.decode_request(body)
    if not signed:  # a body for an OpenAI-compatible upstream: none of it
        chat = openai_chat.encode_request(request, "m")
        assert "thinking_blocks" not in chat["messages"][1]
        assert "reasoning_content" not in chat["messages"][1]
        return
    assistant = bedrock_converse.encode_request(request)["messages"][1]
    kinds = [next(iter(block)) for block in assistant["content"]]
    assert kinds == ["reasoningContent", "reasoningContent", "text", "toolUse"]
    assert assistant["content"][:2] == [
        {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "sig"}}},
        {"reasoningContent": {"redactedContent": "c2VjcmV0"}},
    ]


def test_a_reply_s_signed_thinking_reaches_a_messages_caller_through_chat() -> None:
    reply = bedrock_converse.decode_reply(
        {"output": {"message": {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "sig"}}},
            {"reasoningContent": {"redactedContent": "c2VjcmV0"}},
            {"text": "Hi"},
        ]}}, "stopReason": "end_turn"},
        "model-id",
    )  # fmt: skip
    chat = openai_chat_reply.encode_reply(reply)
    message = chat["choices"][0]["message"]
    assert message["reasoning_content"] == "hm"
    assert message["thinking_blocks"] == [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "c2VjcmV0"},
    ]
    back = openai_chat_reply.decode_reply(chat)
    assert back.blocks == reply.blocks


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("stop_sequence", "stop"),
     ("guardrail_intervened", "content_filter"), ("content_filtered", "content_filter")],
)  # fmt: skip
def test_stop_reasons_map_to_finish_reasons(reason: str, finish: str) -> None:
    reply = bedrock_converse.decode_reply({"stopReason": reason}, "m")
    assert openai_chat_reply.encode_reply(reply)["choices"][0]["finish_reason"] == finish
    assert reply.usage is None
