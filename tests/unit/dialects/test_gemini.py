"""Google's ``generateContent`` dialect: the codec (``dialects/gemini.py``) and the sans-IO
stream reader (``dialects/gemini_to_chat.py``), fed plain bytes split at every boundary."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from parley.dialects import gemini, openai_chat, openai_chat_reply
from parley.dialects.canonical import Unsupported
from parley.dialects.chat_to_messages import ChatToMessages
from parley.dialects.gemini_to_chat import GeminiToChat
from parley.dialects.translator import Chained
from parley.domain.usage import UNBOUNDED, Usage
from tests.unit.dialects.test_stream_translators import LIMIT, events, run, splits

USAGE = {
    "promptTokenCount": 120,
    "candidatesTokenCount": 9,
    "cachedContentTokenCount": 100,
    "thoughtsTokenCount": 4,
    "totalTokenCount": 133,
}
EXPECTED = Usage(prompt_tokens=120, completion_tokens=13, cached_tokens=100, reasoning_tokens=4)


def event(parts: list[Any], finish: str | None = None, usage: Any = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    found: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r1",
    }
    if usage is not None:
        found["usageMetadata"] = usage
    return found


def sse(events_: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(e) + b"\r\n\r\n" for e in events_)


STREAM = sse(
    [
        event([{"text": "Thinking…", "thought": True}]),
        event([{"text": "Bon"}]),
        event([{"text": "jour"}]),
        event([{"functionCall": {"name": "lookup", "args": {"q": "x"}}}], "STOP", USAGE),
    ]
)


def reader() -> GeminiToChat:
    return GeminiToChat(LIMIT, "up", created=1)


def test_gemini_events_become_chat_chunks() -> None:
    out, translator = run(reader, [STREAM])
    deltas = [chunk["choices"][0]["delta"] for chunk in out if chunk["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert deltas[1] == {"reasoning_content": "Thinking…"}
    assert [d["content"] for d in deltas if d.get("content")] == ["Bon", "jour"]
    (call,) = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert call == {
        "index": 0,
        "id": "call_r1_0",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"q":"x"}'},
    }
    finishes = [chunk["choices"][0]["finish_reason"] for chunk in out if chunk["choices"]]
    assert finishes[-1] == "tool_calls" and finishes.count("tool_calls") == 1
    assert out[-1]["choices"] == []
    assert out[-1]["usage"] == {
        "prompt_tokens": 120,
        "completion_tokens": 13,
        "total_tokens": 133,
        "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 4},
    }
    assert all(chunk["id"] == "r1" and chunk["model"] == "gemini-2.5-flash" for chunk in out)
    assert translator.done and translator.delivered() == EXPECTED


def test_every_split_of_a_gemini_stream_gives_the_same_chunks() -> None:
    whole, _ = run(reader, [STREAM])
    for pieces in splits(STREAM):
        out, _ = run(reader, pieces)
        assert out == whole


def test_a_gemini_error_event_is_the_failure() -> None:
    error = {"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}
    translator = reader()
    out = translator.feed(sse([event([{"text": "Hi"}]), error, event([{"text": "more"}])]))
    assert [c["choices"][0]["delta"] for c in out] == [
        {"role": "assistant", "content": ""},
        {"content": "Hi"},
    ]
    assert translator.failure is not None and translator.failure.payload == error
    assert translator.feed(STREAM) == [] and translator.end() == []


def test_a_malformed_or_oversized_event_is_a_failure() -> None:
    translator = reader()
    translator.feed(b"data: [1, 2]\r\n\r\n")
    assert translator.failure is not None and translator.failure.malformed
    small = GeminiToChat(64, "up")
    small.feed(b"data: " + b"x" * 200)
    assert small.failure is not None and small.failure.too_large


def test_a_chain_renders_a_gemini_stream_as_anthropic_events() -> None:
    def chained() -> Chained[bytes]:
        return Chained(reader(), ChatToMessages("public", "msg_1", 25, UNBOUNDED, LIMIT))

    out, translator = run(chained, [STREAM])
    found = events(out)
    assert [name for name, _ in found][:2] == ["message_start", "ping"]
    assert found[-1][0] == "message_stop"
    assert found[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert found[-2][1]["usage"]["cache_read_input_tokens"] == 100
    assert translator.done and translator.delivered() == EXPECTED
    for pieces in splits(STREAM)[::5]:
        assert run(chained, pieces)[0] == out


def request(**body: Any) -> Any:
    return openai_chat.decode_request({"model": "m", **body})


def test_a_chat_body_as_a_generate_content_request() -> None:
    body = gemini.encode_request(
        request(
            messages=[
                {"role": "system", "content": "Be kind."},
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"x": 1}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_a", "content": "not json"},
            ],
            tools=[
                {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
            ],
            tool_choice="required",
            top_k=3,
            response_format={"type": "json_object"},
            reasoning_effort="none",
        )
    )
    assert body == {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"x": 1}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "f", "response": {"output": "not json"}}}],
            },
        ],
        "systemInstruction": {"parts": [{"text": "Be kind."}]},
        "tools": [
            {"functionDeclarations": [{"name": "f", "parametersJsonSchema": {"type": "object"}}]}
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {
            "topK": 3,
            "responseMimeType": "application/json",
            "thinkingConfig": {"thinkingBudget": 0, "includeThoughts": False},
        },
    }


def test_images_by_url_only_where_the_upstream_fetches_them() -> None:
    def with_image(url: str) -> Any:
        part = {"type": "image_url", "image_url": {"url": url}}
        return request(messages=[{"role": "user", "content": [part]}])

    with pytest.raises(Unsupported) as refused:
        gemini.encode_request(with_image("https://example.com/a.png"))
    assert refused.value.param == "messages[0].content[0]"
    remote = gemini.encode_request(with_image("https://example.com/a.png"), remote_images=True)
    part = {"fileData": {"mimeType": "image/png", "fileUri": "https://example.com/a.png"}}
    assert remote["contents"][0]["parts"] == [part]
    stored = gemini.encode_request(with_image("gs://bucket/a.jpg"))
    assert stored["contents"][0]["parts"][0]["fileData"]["mimeType"] == "image/jpeg"
    with pytest.raises(Unsupported):
        gemini.encode_request(with_image("https://example.com/picture"), remote_images=True)


def test_a_whole_reply_and_its_finish_reasons() -> None:
    reply = gemini.decode_reply(event([{"text": "Hi"}], "MAX_TOKENS", USAGE))
    assert openai_chat_reply.encode_reply(reply, created=1)["choices"][0] == {
        "index": 0,
        "message": {"role": "assistant", "content": "Hi"},
        "logprobs": None,
        "finish_reason": "length",
    }
    assert reply.usage == EXPECTED
    for reason in ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"):
        assert gemini.decode_reply(event([], reason)).stop == "content_filter"
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": USAGE}
    assert gemini.decode_reply(blocked).stop == "content_filter"
    own = event([{"functionCall": {"id": "fc-9", "name": "f", "args": {}}}], "STOP")
    (call,) = gemini.decode_reply(own).blocks
    assert getattr(call, "id", None) == "fc-9"
    assert gemini.decode_reply(own).stop == "tool_calls"


def test_usage_that_cannot_be_a_count_is_none() -> None:
    assert gemini.read_usage({"promptTokenCount": -1}) is None
    assert gemini.read_usage("x") is None
    assert gemini.read_usage({"promptTokenCount": 5, "cachedContentTokenCount": 9}) == Usage(
        prompt_tokens=5, cached_tokens=5
    )


def test_a_stream_without_usage_leaves_the_count_to_the_job() -> None:
    out, translator = run(reader, [sse([event([{"text": "Hi"}], "STOP")])])
    assert all(chunk["choices"] for chunk in out)  # no usage chunk of made-up zeros
    assert translator.done and translator.delivered() is None
