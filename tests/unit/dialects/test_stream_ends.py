"""Every stream translator knows whether its upstream's own end of stream came: a body
that ends without it is a failure (``TRUNCATED``), never a finished stream; and every
usage reader refuses what is not a count."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from parley.dialects import anthropic_messages_reply, bedrock_converse, gemini, responses_relay
from parley.dialects.chat_to_messages import ChatToMessages
from parley.dialects.chat_to_responses import ChatToResponses
from parley.dialects.chunk_reader import ChunkReader
from parley.dialects.converse_to_chat import ConverseToChat
from parley.dialects.gemini_to_chat import GeminiToChat
from parley.dialects.messages_relay import MessagesRelay
from parley.dialects.messages_to_chat import MessagesToChat
from parley.dialects.openai_chat_reply import read_usage
from parley.dialects.openai_relay import OpenAIRelay
from parley.dialects.responses_objects import skeleton
from parley.dialects.responses_relay import ResponsesRelay
from parley.dialects.translator import TRUNCATED, Chained, Translator
from parley.domain.usage import UNBOUNDED
from tests.upstreams.bedrock import event_frame

LIMIT = 1 << 20


def sse(payloads: list[Any], name: str | None = None) -> bytes:
    head = b"event: " + name.encode() + b"\n" if name else b""
    return b"".join(head + b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads)


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [choice]}  # fmt: skip


CHAT = sse([chat_chunk({"role": "assistant", "content": ""}), chat_chunk({"content": "Hi"}),
            chat_chunk({}, "stop")])  # fmt: skip
CHAT_END = b"data: [DONE]\n\n"
MESSAGE_START = {"type": "message_start", "message": {
    "id": "msg_1", "model": "claude", "content": [],
    "usage": {"input_tokens": 3, "output_tokens": 1}}}  # fmt: skip
MESSAGES = b"".join(
    sse([event], event["type"])
    for event in [
        MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 2}},
    ]
)  # fmt: skip
MESSAGES_END = sse([{"type": "message_stop"}], "message_stop")
GEMINI = sse([{"candidates": [{"content": {"parts": [{"text": "Hi"}]}}]}])
GEMINI_END = sse(
    [
        {
            "candidates": [{"content": {"parts": [{"text": "!"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2},
        }
    ]
)
CONVERSE = event_frame("messageStart", {"role": "assistant"}) + event_frame(
    "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}}
)
CONVERSE_END = event_frame("messageStop", {"stopReason": "end_turn"})
RESPONSE = {"id": "resp_1", "status": "in_progress", "output": [], "usage": None}
RESPONSES = sse(
    [{"type": "response.created", "response": RESPONSE, "sequence_number": 0},
     {"type": "response.output_text.delta", "delta": "Hi", "sequence_number": 1}]
)  # fmt: skip
RESPONSES_END = sse([{"type": "response.completed", "sequence_number": 2, "response": {
    **RESPONSE, "status": "completed",
    "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}}])  # fmt: skip


def relay() -> OpenAIRelay:
    return OpenAIRelay(
        "m",
        "chatcmpl-",
        "chat.completion.chunk",
        include_usage=False,
        prompt_estimate=3,
        allowance=UNBOUNDED,
        max_event_bytes=LIMIT,
        shapes=True,
    )


STREAMS: dict[str, tuple[Callable[[], Translator[Any]], bytes, bytes]] = {
    "chunk-reader": (lambda: ChunkReader(LIMIT), CHAT, CHAT_END),
    "openai-relay": (relay, CHAT, CHAT_END),
    "chat-to-messages": (lambda: ChatToMessages("m", "msg_1", 3, UNBOUNDED, LIMIT), CHAT, CHAT_END),
    "chat-to-responses": (
        lambda: ChatToResponses(skeleton_for(), 3, UNBOUNDED, LIMIT),
        CHAT,
        CHAT_END,
    ),
    "messages-to-chat": (lambda: MessagesToChat(LIMIT), MESSAGES, MESSAGES_END),
    "messages-relay": (lambda: MessagesRelay("m", 3, LIMIT), MESSAGES, MESSAGES_END),
    "gemini-to-chat": (lambda: GeminiToChat(LIMIT), GEMINI, GEMINI_END),
    "converse-to-chat": (lambda: ConverseToChat(LIMIT, "m"), CONVERSE, CONVERSE_END),
    "responses-relay": (lambda: ResponsesRelay("m", 3, LIMIT), RESPONSES, RESPONSES_END),
    "chained": (lambda: Chained(MessagesToChat(LIMIT), relay()), MESSAGES, MESSAGES_END),
}


def skeleton_for() -> dict[str, Any]:
    return skeleton({"model": "m", "input": "hi"}, "resp_1", "m")


@pytest.mark.parametrize("name", STREAMS)
def test_a_body_that_ends_before_the_stream_is_truncated(name: str) -> None:
    make, body, _ = STREAMS[name]
    translator = make()
    given = list(translator.feed(body))
    assert given  # what came before the cut is handed on
    assert list(translator.end()) == []
    assert translator.failure == TRUNCATED and not translator.done


@pytest.mark.parametrize("name", STREAMS)
def test_a_stream_with_its_end_is_not_a_failure(name: str) -> None:
    make, body, end = STREAMS[name]
    translator = make()
    translator.feed(body + end)
    translator.end()
    assert translator.failure is None


def test_converse_without_its_metadata_after_message_stop_is_whole() -> None:
    translator = ConverseToChat(LIMIT, "m")
    translator.feed(CONVERSE + CONVERSE_END)
    translator.end()
    assert translator.failure is None and translator.done


ABSURD: list[Any] = [1e30, 1.5e300, "77777777", -5, True, None, 10**10]


@pytest.mark.parametrize("value", ABSURD, ids=repr)
def test_every_dialect_refuses_what_is_not_a_count(value: Any) -> None:
    assert read_usage({"prompt_tokens": 3, "completion_tokens": value}) is None
    details = {"prompt_tokens": 3, "completion_tokens": 2,
               "prompt_tokens_details": {"cached_tokens": value}}  # fmt: skip
    assert read_usage(details) is None or value is None
    anthropic = {"input_tokens": 3, "output_tokens": 2, "cache_read_input_tokens": value}
    assert anthropic_messages_reply.read_usage(anthropic) is None or value is None
    assert anthropic_messages_reply.read_usage({"input_tokens": 3, "output_tokens": value}) is None
    assert gemini.read_usage({"promptTokenCount": 3, "candidatesTokenCount": value}) is None or (
        value is None
    )
    assert gemini.read_usage({"promptTokenCount": value}) is None
    assert bedrock_converse.read_usage({"inputTokens": 3, "outputTokens": value}) is None
    assert responses_relay.read_usage({"input_tokens": 3, "output_tokens": value}) is None
