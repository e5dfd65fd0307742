"""The sans-IO stream translators, fed plain bytes: whole, split at every boundary, and
one byte at a time, each split giving the same output as the whole."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from parley.dialects.chat_to_messages import ChatToMessages
from parley.dialects.converse_to_chat import ConverseToChat
from parley.dialects.messages_relay import MessagesRelay
from parley.dialects.messages_to_chat import MessagesToChat
from parley.dialects.translator import TRUNCATED, Chained, Translator
from parley.domain.usage import UNBOUNDED, Usage
from tests.upstreams.bedrock import event_frame

LIMIT = 1 << 20


def chat_sse(chunks: list[Any]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks) + (
        b"data: [DONE]\n\n"
    )


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "up",
        "choices": [choice],
        **extra,
    }


CHAT_STREAM = chat_sse(
    [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Let me "}),
        chunk({"reasoning_content": "think."}),
        chunk({"content": "Hello"}),
        chunk({"content": " wörld"}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({}, "tool_calls"),
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "up",
            "choices": [],
            "usage": {
                "prompt_tokens": 30,
                "completion_tokens": 12,
                "total_tokens": 42,
                "prompt_tokens_details": {"cached_tokens": 20},
            },
        },
    ]
)


def run(make: Callable[[], Translator[Any]], pieces: Sequence[bytes]) -> tuple[list[Any], Any]:
    translator = make()
    out: list[Any] = []
    for piece in pieces:
        out.extend(translator.feed(piece))
    out.extend(translator.end())
    return out, translator


def splits(data: bytes) -> list[list[bytes]]:
    every = [[data[:at], data[at:]] for at in range(1, len(data))]
    return [*every, [data[i : i + 1] for i in range(len(data))]]


def events(out: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for block in b"".join(out).split(b"\n\n"):
        if not block:
            continue
        name, data = block.split(b"\n")
        found.append((name.removeprefix(b"event: ").decode(), orjson.loads(data[6:])))
    return found


def chat_to_messages() -> ChatToMessages:
    return ChatToMessages("public-model", "msg_1", 25, UNBOUNDED, LIMIT)


def test_a_chat_stream_becomes_anthropic_events_in_order() -> None:
    out, translator = run(chat_to_messages, [CHAT_STREAM])
    found = events(out)
    assert [name for name, _ in found] == [
        "message_start", "ping",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]  # fmt: skip
    start = found[0][1]["message"]
    assert start["model"] == "public-model" and start["id"] == "msg_1"
    assert start["usage"]["input_tokens"] == 25  # the estimate, until the upstream counts
    assert found[2][1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert found[3][1]["delta"] == {"type": "thinking_delta", "thinking": "Let me "}
    assert found[6][1]["content_block"] == {"type": "text", "text": ""}
    assert found[8][1]["delta"] == {"type": "text_delta", "text": " wörld"}
    tool = found[10][1]
    assert tool["index"] == 2
    assert tool["content_block"] == {
        "type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}
    }  # fmt: skip
    arguments = "".join(e["delta"]["partial_json"] for _, e in found[11:13])
    assert orjson.loads(arguments) == {"city": "Paris"}
    delta = found[14][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"] == {
        "input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 20,
        "output_tokens": 12,
    }
    assert translator.done
    assert translator.delivered() == Usage(prompt_tokens=30, completion_tokens=12, cached_tokens=20)


def test_every_split_of_a_chat_stream_gives_the_same_events() -> None:
    whole, _ = run(chat_to_messages, [CHAT_STREAM])
    for pieces in splits(CHAT_STREAM):
        out, translator = run(chat_to_messages, pieces)
        assert b"".join(out) == b"".join(whole), pieces
        assert translator.delivered() == Usage(
            prompt_tokens=30, completion_tokens=12, cached_tokens=20
        )


def test_finish_reasons_map_to_stop_reasons() -> None:
    for finish, reason in (("stop", "end_turn"), ("length", "max_tokens"),
                           ("tool_calls", "tool_use"), ("content_filter", "refusal")):  # fmt: skip
        data = chat_sse([chunk({"content": "hi"}), chunk({}, finish)])
        out, _ = run(chat_to_messages, [data])
        (delta,) = [event for name, event in events(out) if name == "message_delta"]
        assert delta["delta"]["stop_reason"] == reason


def test_a_chat_stream_cut_short_is_a_failure_billed_as_estimated() -> None:
    data = chat_sse([chunk({"content": "abcdefgh"})]).removesuffix(b"data: [DONE]\n\n")
    out, translator = run(chat_to_messages, [data])
    names = [name for name, _ in events(out)]
    assert "message_stop" not in names and "message_delta" not in names
    assert translator.failure == TRUNCATED and not translator.done
    assert translator.delivered() == Usage(prompt_tokens=25, completion_tokens=2, estimated=True)


def test_an_error_event_stops_the_chat_translation() -> None:
    error = {"error": {"message": "boom", "type": "server_error"}}
    data = chat_sse([chunk({"content": "hi"}), error, chunk({"content": "never"})])
    translator = chat_to_messages()
    out = translator.feed(data)
    assert translator.failure is not None and translator.failure.payload == error
    assert b"never" not in b"".join(out)
    assert translator.feed(b"data: {}\n\n") == []
    assert translator.end() == []


def test_an_oversized_event_is_a_failure_not_an_exception() -> None:
    translator = ChatToMessages("m", "msg_1", 1, UNBOUNDED, 64)
    assert translator.feed(b"data: " + b"x" * 100) == []
    assert translator.failure is not None and translator.failure.too_large


def anthropic_sse(events_: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
        for name, data in events_
    )


MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_up", "type": "message", "role": "assistant", "model": "claude-upstream",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 7, "cache_creation_input_tokens": 5,
                  "cache_read_input_tokens": 100, "output_tokens": 1},
    },
}  # fmt: skip
ANTHROPIC_STREAM = anthropic_sse(
    [
        ("message_start", MESSAGE_START),
        ("ping", {"type": "ping"}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "thinking", "thinking": "",
                                                   "signature": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "thinking_delta", "thinking": "Hmm."}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "signature_delta", "signature": "c2ln"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "text_delta", "text": "Bonjour"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("content_block_start", {"type": "content_block_start", "index": 2,
                                 "content_block": {"type": "tool_use", "id": "toolu_1",
                                                   "name": "lookup", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2,
                                 "delta": {"type": "input_json_delta", "partial_json": '{"q":'}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2,
                                 "delta": {"type": "input_json_delta", "partial_json": ' "x"}'}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 9}}),
        ("message_stop", {"type": "message_stop"}),
    ]
)  # fmt: skip
EXPECTED_USAGE = Usage(
    prompt_tokens=112, completion_tokens=9, cached_tokens=100, cache_write_tokens=5
)


def messages_to_chat() -> MessagesToChat:
    return MessagesToChat(LIMIT, created=5)


def test_anthropic_events_become_chat_chunks() -> None:
    out, translator = run(messages_to_chat, [ANTHROPIC_STREAM])
    deltas = [c["choices"][0]["delta"] for c in out if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert {"reasoning_content": "Hmm."} in deltas
    assert {"content": "Bonjour"} in deltas
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert calls[0] == {"index": 0, "id": "toolu_1", "type": "function",
                        "function": {"name": "lookup", "arguments": ""}}  # fmt: skip
    assert "".join(c["function"]["arguments"] for c in calls) == '{"q": "x"}'
    finishes = [c["choices"][0]["finish_reason"] for c in out if c["choices"]]
    assert finishes[-1] == "tool_calls"
    assert out[-1]["choices"] == []
    assert out[-1]["usage"] == {
        "prompt_tokens": 112, "completion_tokens": 9, "total_tokens": 121,
        "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 5},
    }  # fmt: skip
    assert all(c["id"] == "msg_up" and c["object"] == "chat.completion.chunk" for c in out)
    assert translator.done
    assert translator.delivered() == EXPECTED_USAGE


def test_every_split_of_an_anthropic_stream_gives_the_same_chunks() -> None:
    whole, _ = run(messages_to_chat, [ANTHROPIC_STREAM])
    for pieces in splits(ANTHROPIC_STREAM):
        out, _ = run(messages_to_chat, pieces)
        assert out == whole


def test_an_anthropic_error_event_is_the_failure() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    data = anthropic_sse([("message_start", MESSAGE_START), ("error", error)])
    translator = messages_to_chat()
    out = translator.feed(data)
    assert len(out) == 1  # the role chunk, made before the error
    assert translator.failure is not None and translator.failure.payload == error


def relay() -> MessagesRelay:
    return MessagesRelay("public-model", 3, LIMIT)


def test_the_relay_passes_bytes_through_but_for_the_model() -> None:
    out, translator = run(relay, [ANTHROPIC_STREAM])
    relayed = b"".join(out)
    assert relayed.replace(b'"model":"public-model"', b'"model":"claude-upstream"') == (
        ANTHROPIC_STREAM
    )
    assert b"claude-upstream" not in relayed
    assert translator.done
    assert translator.delivered() == EXPECTED_USAGE


def test_every_split_of_a_relayed_stream_gives_the_same_bytes() -> None:
    whole, _ = run(relay, [ANTHROPIC_STREAM])
    for pieces in splits(ANTHROPIC_STREAM):
        out, translator = run(relay, pieces)
        assert b"".join(out) == b"".join(whole)
        assert translator.delivered() == EXPECTED_USAGE


def test_a_relayed_stream_cut_after_content_is_estimated() -> None:
    stop = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}'
    cut = ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(stop)]
    out, translator = run(relay, [cut])
    assert b"".join(out).count(b"Bonjour") == 1
    assert translator.failure == TRUNCATED  # no ``message_stop``: cut short, not finished
    usage = translator.delivered()
    assert usage is not None and usage.estimated
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (112, 100, 5)
    assert usage.completion_tokens == (len("Hmm.") + len("Bonjour") + 3) // 4


def test_a_relayed_error_event_is_the_failure() -> None:
    error = {"type": "error", "error": {"type": "api_error", "message": "Internal"}}
    translator = relay()
    translator.feed(anthropic_sse([("message_start", MESSAGE_START)]))
    assert translator.feed(anthropic_sse([("error", error)])) == []
    assert translator.failure is not None and translator.failure.payload == error


def test_what_came_before_an_error_event_in_the_same_read_is_relayed() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    ping = anthropic_sse([("ping", {"type": "ping"})])
    translator = relay()
    translator.feed(anthropic_sse([("message_start", MESSAGE_START)]))
    assert translator.feed(ping + anthropic_sse([("error", error)])) == [ping]
    assert translator.failure is not None


def chained() -> Chained[bytes]:
    return Chained(messages_to_chat(), chat_to_messages())


def test_a_chain_reads_one_dialect_into_chunks_and_renders_another() -> None:
    out, translator = run(chained, [ANTHROPIC_STREAM])
    found = events(out)
    names = [name for name, _ in found]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    deltas = [data["delta"] for _, data in found if "delta" in data]
    text = [delta["text"] for delta in deltas if delta.get("type") == "text_delta"]
    assert text == ["Bonjour"]
    arguments = "".join(
        data["delta"]["partial_json"]
        for _, data in found
        if data.get("delta", {}).get("type") == "input_json_delta"
    )
    assert arguments == '{"q": "x"}'
    assert found[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert translator.done
    assert translator.delivered() == EXPECTED_USAGE


def converse_reasoning() -> bytes:
    """A ConverseStream of signed thinking, redacted thinking and text."""
    deltas = [
        (0, {"reasoningContent": {"text": "hm"}}),
        (0, {"reasoningContent": {"signature": "sig"}}),
        (1, {"reasoningContent": {"redactedContent": "c2VjcmV0"}}),
        (2, {"text": "Hi"}),
    ]
    return b"".join(
        [
            event_frame("messageStart", {"role": "assistant"}),
            *(
                event_frame("contentBlockDelta", {"contentBlockIndex": at, "delta": delta})
                for at, delta in deltas
            ),
            event_frame("messageStop", {"stopReason": "end_turn"}),
            event_frame("metadata", {"usage": {"inputTokens": 5, "outputTokens": 7}}),
        ]
    )


def test_converse_thinking_reaches_a_messages_caller_signed() -> None:
    def make() -> Chained[bytes]:
        return Chained(ConverseToChat(LIMIT, "up"), chat_to_messages())

    out, _ = run(make, [converse_reasoning()])
    blocks = [
        (data.get("content_block"), data.get("delta"))
        for name, data in events(out)
        if name in ("content_block_start", "content_block_delta")
    ]
    assert blocks == [
        ({"type": "thinking", "thinking": "", "signature": ""}, None),
        (None, {"type": "thinking_delta", "thinking": "hm"}),
        (None, {"type": "signature_delta", "signature": "sig"}),
        ({"type": "redacted_thinking", "data": "c2VjcmV0"}, None),
        ({"type": "text", "text": ""}, None),
        (None, {"type": "text_delta", "text": "Hi"}),
    ]


def test_every_split_of_a_chained_stream_gives_the_same_events() -> None:
    whole, _ = run(chained, [ANTHROPIC_STREAM])
    for pieces in splits(ANTHROPIC_STREAM)[::7]:
        out, _ = run(chained, pieces)
        assert out == whole


def test_a_chain_stops_at_the_upstream_failure() -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    translator = chained()
    out = translator.feed(anthropic_sse([("message_start", MESSAGE_START), ("error", error)]))
    assert [name for name, _ in events(list(out))] == ["message_start", "ping"]
    assert translator.failure is not None and translator.failure.payload == error
    assert translator.feed(ANTHROPIC_STREAM) == ()
    assert translator.end() == ()
