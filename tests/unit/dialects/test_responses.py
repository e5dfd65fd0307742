"""The Responses dialect: its request read into the canonical call, replies written as
``response`` objects, and ``ChatToResponses`` fed plain bytes (whole, split at every
boundary, one byte at a time) and chat chunks from another provider's reader."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from parley.dialects import openai_chat, openai_responses, responses_objects
from parley.dialects.canonical import (
    Image,
    Reasoning,
    Reply,
    Text,
    ToolCall,
    ToolResult,
    Unsupported,
)
from parley.dialects.chat_to_responses import ChatToResponses
from parley.dialects.responses_relay import ResponsesRelay
from parley.dialects.translator import Chained
from parley.domain.usage import UNBOUNDED, Usage
from tests.unit.dialects.test_stream_translators import (
    ANTHROPIC_STREAM,
    CHAT_STREAM,
    LIMIT,
    chat_sse,
    chunk,
    messages_to_chat,
    run,
    splits,
)

BODY: dict[str, Any] = {"model": "gpt-like", "input": "hi"}


def counting_ids() -> Callable[[str], str]:
    counter = itertools.count(1)
    return lambda prefix: f"{prefix}{next(counter)}"


def renderer(body: dict[str, Any] | None = None) -> ChatToResponses:
    skeleton = responses_objects.skeleton(body or BODY, "resp_1", "gpt-like", created_at=7)
    return ChatToResponses(skeleton, 11, UNBOUNDED, LIMIT, counting_ids())


def events(out: list[bytes]) -> list[dict[str, Any]]:
    found = []
    for block in b"".join(out).split(b"\n\n"):
        if not block:
            continue
        name, data = block.split(b"\n")
        payload = orjson.loads(data.removeprefix(b"data: "))
        assert name == b"event: " + payload["type"].encode()
        assert data.removeprefix(b"data: ") == orjson.dumps(payload)  # as orjson writes it
        found.append(payload)
    return found


def decode(body: dict[str, Any]) -> Any:
    return openai_responses.decode_request(body, openai_responses.normalized_input(body["input"]))


# the request


def test_items_become_the_canonical_call() -> None:
    body = {
        "model": "m",
        "instructions": "Be terse.",
        "input": [
            {"role": "developer", "content": "Answer in French."},
            {"role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            ]},
            {"type": "reasoning", "id": "rs_1", "summary": [],
             "encrypted_content": "opaque"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Un point."}]},
            {"type": "function_call", "call_id": "call_1", "name": "look",
             "arguments": '{"q": 1}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "found"},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [{"type": "function", "name": "look", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "function", "name": "look"},
        "parallel_tool_calls": False,
        "max_output_tokens": 50,
        "text": {"format": {"type": "json_schema", "name": "out", "strict": True,
                            "schema": {"type": "object"}}},
        "reasoning": {"effort": "low"},
        "include": ["reasoning.encrypted_content"],
        "store": False,
    }  # fmt: skip
    request = decode(body)
    assert [t.text for t in request.instructions] == ["Be terse.", "Answer in French."]
    user, assistant, results = request.messages
    assert user.blocks == (Text("What is this?"), Image(media_type="image/png", data="AAAA"))
    assert assistant.blocks == (
        Reasoning("", redacted="opaque"),
        Text("Un point."),
        ToolCall("call_1", "look", '{"q": 1}'),
    )
    assert results.blocks == (ToolResult("call_1", (Text("found"),)), Text("Thanks"))
    assert request.tool_choice is not None and request.tool_choice.name == "look"
    assert request.tool_choice.parallel is False
    assert request.max_output_tokens == 50
    assert request.response_format is not None
    assert request.response_format.schema == {
        "name": "out", "schema": {"type": "object"}, "strict": True
    }  # fmt: skip
    assert request.thinking is not None and request.thinking.budget_tokens == 2048
    chat = openai_chat.encode_request(request, "up")
    assert chat["response_format"]["json_schema"]["name"] == "out"
    assert chat["messages"][0] == {"role": "system", "content": "Be terse.\n\nAnswer in French."}
    assert chat["messages"][-2] == {"role": "tool", "tool_call_id": "call_1", "content": "found"}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"tools": [{"type": "file_search", "vector_store_ids": []}]}, "tools[0].type"),
        ({"background": True}, "background"),
        ({"conversation": "conv_1"}, "conversation"),
        ({"frobnicate": 1}, "frobnicate"),
        ({"text": {"format": {"type": "xml"}}}, "text.format.type"),
        ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0].type"),
        ({"input": [{"role": "user", "content": [{"type": "input_file"}]}]},
         "input[0].content[0].type"),
        ({"input": [{"role": "user", "content": "a"}, {"type": "function_call_output",
                     "call_id": "c", "output": [{"type": ["input_text"]}]}]},
         "input[1].output.content[0].type"),
        ({"input": [{"role": "tool", "content": "a"}]}, "input[0].role"),
        ({"input": [{"type": "function_call_output"}]}, "input[0].call_id"),
    ],
)  # fmt: skip
def test_what_cannot_be_done_is_refused_by_name(body: dict[str, Any], param: str) -> None:
    with pytest.raises(Unsupported) as refused:
        decode({**BODY, **body})
    assert refused.value.param == param
    if param == "tools[0].type":
        assert body["tools"][0]["type"] in refused.value.message


def test_string_input_is_one_user_message_with_an_id() -> None:
    (item,) = openai_responses.normalized_input("hello")
    assert item["type"] == "message" and item["role"] == "user"
    assert item["content"] == [{"type": "input_text", "text": "hello"}]
    assert item["id"].startswith("msg_")


# the reply


def test_a_reply_becomes_a_response_object() -> None:
    reply = Reply(
        "chatcmpl-1",
        "up",
        (Reasoning("hmm"), Text("Hello"), ToolCall("call_9", "look", "{}")),
        "tool_calls",
        None,
    )
    usage = Usage(prompt_tokens=10, completion_tokens=5, cached_tokens=4, reasoning_tokens=2)
    skeleton = responses_objects.skeleton({**BODY, "metadata": {"a": "b"}}, "resp_x", "gpt-like")
    response = responses_objects.encode_response(reply, usage, skeleton)
    assert response["status"] == "completed"
    assert response["model"] == "gpt-like" and response["metadata"] == {"a": "b"}
    kinds = [item["type"] for item in response["output"]]
    assert kinds == ["reasoning", "message", "function_call"]
    assert response["output"][1]["content"][0]["text"] == "Hello"
    assert response["output"][2]["call_id"] == "call_9"
    assert response["usage"] == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 2},
        "total_tokens": 15,
    }


def test_a_reply_cut_by_the_limit_is_incomplete() -> None:
    reply = Reply("c", "up", (Text("Hel"),), "length", None)
    skeleton = responses_objects.skeleton(BODY, "resp_x", "gpt-like")
    response = responses_objects.encode_response(reply, Usage(1, 1), skeleton)
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}


# the stream


def test_a_chat_stream_becomes_the_responses_event_sequence() -> None:
    out, translator = run(renderer, [CHAT_STREAM])
    found = events(out)
    assert [event["sequence_number"] for event in found] == list(range(len(found)))
    assert [event["type"] for event in found] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.content_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert found[0]["response"]["status"] == "in_progress"
    assert found[9]["text"] == found[11]["text"] == "Let me think."
    assert found[10]["part"] == {"type": "summary_text", "text": "Let me think."}
    assert found[18]["text"] == "Hello wörld"
    assert found[24]["arguments"] == '{"city": "Paris"}' and found[24]["name"] == "get_weather"
    final = found[-1]["response"]
    assert final["status"] == "completed" and final["id"] == "resp_1"
    assert [item["id"] for item in final["output"]] == ["rs_1", "msg_2", "fc_3"]
    assert final["output"][2]["call_id"] == "call_1"
    assert final["usage"]["input_tokens_details"] == {"cached_tokens": 20, "cache_write_tokens": 0}
    assert translator.done and translator.response == final
    assert translator.delivered() == Usage(prompt_tokens=30, completion_tokens=12, cached_tokens=20)


def test_every_split_of_a_chat_stream_gives_the_same_events() -> None:
    whole, _ = run(renderer, [CHAT_STREAM])
    for pieces in splits(CHAT_STREAM)[::5]:
        out, _ = run(renderer, pieces)
        assert out == whole
    one_by_one, _ = run(renderer, splits(CHAT_STREAM)[-1])
    assert one_by_one == whole


def test_an_anthropic_stream_through_the_chain_gives_the_same_items() -> None:
    def chained() -> Chained[bytes]:
        return Chained(messages_to_chat(), renderer())

    whole, _ = run(chained, [ANTHROPIC_STREAM])
    found = events(whole)
    final = found[-1]["response"]
    assert found[-1]["type"] == "response.completed"
    assert [item["type"] for item in final["output"]] == ["reasoning", "message", "function_call"]
    assert final["output"][2]["arguments"] == '{"q": "x"}'
    assert final["usage"]["input_tokens_details"]["cached_tokens"] == 100
    for pieces in splits(ANTHROPIC_STREAM)[::11]:
        out, _ = run(chained, pieces)
        assert out == whole


def test_parallel_calls_interleaved_each_get_their_item() -> None:
    def call(index: int, **function: str) -> dict[str, Any]:
        head = {"id": f"call_{index}", "type": "function"} if "name" in function else {}
        return chunk({"tool_calls": [{"index": index, **head, "function": function}]})

    stream = chat_sse(
        [
            call(0, name="a", arguments=""),
            call(1, name="b", arguments=""),
            call(0, arguments="{}"),
            call(1, arguments='{"x":1}'),
            chunk({}, "tool_calls"),
        ]
    )
    out, _ = run(renderer, [stream])
    final = events(out)[-1]["response"]
    assert [(i["name"], i["arguments"]) for i in final["output"]] == [("a", "{}"), ("b", '{"x":1}')]


def test_a_stream_cut_by_the_limit_ends_incomplete() -> None:
    stream = chat_sse([chunk({"content": "Hel"}), chunk({}, "length")])
    out, _ = run(renderer, [stream])
    last = events(out)[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_an_upstream_error_is_a_failure_and_failed_says_so() -> None:
    stream = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    stream += b'data: {"error": {"message": "boom"}}\n\n'
    translator = renderer()
    out = translator.feed(stream)
    assert translator.failure is not None and translator.failure.payload is not None
    ending = events([*out, translator.failed("upstream_error", "The upstream failed.")])
    assert [e["type"] for e in ending[-2:]] == ["error", "response.failed"]
    assert ending[-2]["code"] == "upstream_error"
    failed = ending[-1]["response"]
    assert failed["status"] == "failed" and failed["error"]["message"] == "The upstream failed."
    numbers = [event["sequence_number"] for event in ending]
    assert numbers == list(range(len(ending)))


def test_chunks_from_another_reader_render_the_same_as_bytes() -> None:
    chunks = [
        chunk({"content": "Hi"}),
        chunk({}, "stop"),
    ]
    from_bytes, _ = run(renderer, [chat_sse(chunks)])
    translator = renderer()
    from_chunks = [*translator.feed_chunks(chunks), *translator.finish()]
    assert from_chunks == from_bytes


# the native relay


def native_stream() -> bytes:
    from tests.upstreams.responses_api import response_for, stream_events

    events = stream_events(response_for({"model": "up", "input": "hello there"}, 3))
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


def relay() -> ResponsesRelay:
    return ResponsesRelay("gpt-native", 5, LIMIT)


def test_the_relay_passes_events_through_but_for_the_model() -> None:
    stream = native_stream()
    out, translator = run(relay, [stream])
    found = events(out)
    upstream = events([stream])
    assert len(found) == len(upstream)
    for mine, theirs in zip(found, upstream, strict=True):
        if "response" in theirs:
            assert mine["response"]["model"] == "gpt-native"
            theirs["response"]["model"] = "gpt-native"
        assert mine == theirs
    assert translator.done
    assert translator.response is not None and translator.response["model"] == "gpt-native"
    assert translator.delivered() == Usage(prompt_tokens=2, completion_tokens=5, reasoning_tokens=2)
    for pieces in splits(stream)[::13]:
        assert run(relay, pieces)[0] == out


def test_a_relayed_error_event_is_the_failure() -> None:
    head = native_stream().split(b"\n\n")[0] + b"\n\n"
    error = {"type": "error", "code": "server_error", "message": "boom", "sequence_number": 1}
    translator = relay()
    out = translator.feed(head + b"event: error\ndata: " + orjson.dumps(error) + b"\n\n")
    assert len(out) == 1
    assert translator.failure is not None and translator.failure.payload is not None
    ending = events([translator.failed("upstream_error", "The upstream failed.")])
    assert [(e["type"], e["sequence_number"]) for e in ending] == [
        ("error", 1),
        ("response.failed", 2),
    ]
    assert ending[1]["response"]["status"] == "failed"
