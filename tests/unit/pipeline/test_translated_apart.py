"""What a body process writes for an upstream is what the adapter writes for a small body.

``translate_apart`` runs in a body process for a large body; here it is called in place,
and its result, opened as the serving process opens it, is compared with the adapter's
own writing of the same body for every codec (``dialects/outbound.py``).
"""

from __future__ import annotations

import gc
import time
from typing import Any

import orjson
import pytest

from parley.api import apart
from parley.api.apart import (
    BULK_BYTES,
    ChatRead,
    Large,
    Made,
    joined,
    read_chat,
    read_chat_apart,
    split,
    translate_apart,
    translate_kept,
)
from parley.api.chat_request import Images, parse_chat, parse_chat_apart
from parley.api.messages_request import parse_count, parse_messages
from parley.api.refusal import Refusal
from parley.catalog_settings import AwsSettings
from parley.dialects import anthropic_messages, openai_chat
from parley.dialects.call import OPENAI_CHAT, ChatCall
from parley.dialects.outbound import Codec, Translated, chat_body, encode, outbound
from parley.domain.tokens import IMAGE_TOKENS_CEILING, TEMPLATE_TOKENS, TOKENS_PER_IMAGE
from parley.errors import InvalidRequest
from parley.http import HttpClient
from parley.providers.base import Target
from parley.providers.registry import ProviderRegistry
from parley.runtime.body_pool import BodyPool

CHAT: dict[str, Any] = {
    "model": "caller-model",
    "messages": [
        {"role": "system", "content": "be brief"},
        *({"role": "user", "content": f"line {n}"} for n in range(50)),
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "and?"}]},
    ],
    "max_tokens": 30,
    "temperature": 0.5,
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "x", "schema": {"type": "object", "properties": {}}},
    },
}
CODECS = [
    Codec("anthropic", 512),
    Codec("gemini"),
    Codec("gemini", remote_images=True),
    Codec("bedrock"),
    Codec("bedrock", structured="tool"),
]


def _opened(made: Made | Refusal) -> tuple[dict[str, Any], bool]:
    assert isinstance(made, Made)
    return orjson.loads(orjson.dumps(joined(made.body))), made.json_tool


@pytest.mark.parametrize("codec", CODECS, ids=repr)
def test_a_chat_body_is_written_apart_as_its_adapter_writes_it(codec: Codec) -> None:
    chat = CHAT if codec.dialect != "anthropic" else {**CHAT, "response_format": None}
    payload, json_tool = encode(openai_chat.decode_request(chat), codec, "")
    assert _opened(translate_apart(orjson.dumps(chat), "chat", codec, False)) == (
        payload,
        json_tool,
    )


def test_a_messages_body_is_written_apart_as_a_chat_body_or_its_upstreams() -> None:
    body = {"model": "m", "max_tokens": 9, "messages": CHAT["messages"][1:], "system": "hi"}
    raw = orjson.dumps(body)
    chat = chat_body(anthropic_messages.decode_request(body), "", False)
    assert _opened(translate_apart(raw, "messages", None, False)) == (chat, False)
    gemini = Codec("gemini")
    assert _opened(translate_apart(raw, "messages", gemini, False)) == (
        encode(anthropic_messages.decode_request(body), gemini, "")[0],
        False,
    )


def test_what_an_upstream_cannot_say_is_refused_apart_as_here() -> None:
    raw = orjson.dumps({**CHAT, "temperature": 1.5, "response_format": None})
    refused = translate_apart(raw, "chat", Codec("anthropic", 512), False)
    assert refused == Refusal(
        InvalidRequest, "Anthropic models take a temperature from 0 to 1.", "temperature", None
    )


def test_the_adapter_takes_the_body_written_apart_for_its_codec_only() -> None:
    codec = Codec("anthropic", 512)
    written = {"model": "", "max_tokens": 512, "messages": orjson.Fragment(b"[]")}
    chat = {**CHAT, "response_format": None}
    carried = ChatCall(
        OPENAI_CHAT, chat, openai_chat.decode_request, translated=Translated(codec, written, False)
    )
    payload, _ = outbound(carried, codec, "claude-up")
    assert payload == {**written, "model": "claude-up"}
    assert written["model"] == ""  # the adapter's copy, not the kept one
    other, _ = outbound(carried, Codec("anthropic", 100), "claude-up")
    assert other["max_tokens"] == 30 and isinstance(other["messages"], list)


def test_only_large_arrays_travel_as_bytes() -> None:
    small = [1, 2, 3]
    large = ["x" * 100] * (BULK_BYTES // 100)
    parts = split({"a": small, "b": large, "c": "text", "messages": small}, "messages")
    assert parts.small == {"a": small, "b": None, "c": "text", "messages": None}
    assert set(parts.bulk) == {"b", "messages"}
    opened = joined(parts)
    assert list(opened) == ["a", "b", "c", "messages"]
    assert orjson.loads(orjson.dumps(opened))["b"] == large


async def test_a_large_bodys_translation_is_made_once_a_call() -> None:
    made: list[tuple[Any, ...]] = []

    class Pool:
        async def run(self, group: int, function: Any, *args: Any) -> Any:
            made.append((group, *args[1:]))
            return function(*args)

    large = Large(orjson.dumps(CHAT), "chat", 7, Pool())  # type: ignore[arg-type]
    codec = Codec("gemini")
    first = await large.translated(codec)
    again = await large.translated(codec)
    assert isinstance(first, Translated) and isinstance(again, Translated)
    assert first.payload.keys() == again.payload.keys()
    assert made == [(7, "chat", codec, False)]


def test_a_body_read_apart_is_translated_from_what_its_process_kept_once() -> None:
    raw, codec = orjson.dumps(CHAT), Codec("gemini")
    assert isinstance(read_chat_apart(raw, 1024, "token-a"), ChatRead)
    assert gc.get_freeze_count() > 0  # kept out of the collector's walks meanwhile
    made = translate_kept("token-a", "chat", codec, False)
    assert gc.get_freeze_count() == 0
    assert _opened(made) == _opened(translate_apart(raw, "chat", codec, False))
    assert translate_kept("token-a", "chat", codec, False) is None  # one translation
    read_chat_apart(raw, 1024, "token-c")
    assert translate_kept("token-b", "chat", codec, False) is None  # another call's


def test_a_body_process_keeps_one_body_and_for_a_while_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw, codec = orjson.dumps(CHAT), Codec("gemini")
    read_chat_apart(raw, 1024, "first")
    read_chat_apart(raw, 1024, "second")
    assert translate_kept("first", "chat", codec, False) is None  # the later one replaced it
    monkeypatch.setattr(apart, "KEPT_SECONDS", 0.01)
    read_chat_apart(raw, 1024, "third")
    time.sleep(0.2)
    assert translate_kept("third", "chat", codec, False) is None
    assert not apart._kept


async def test_a_translation_the_reading_process_no_longer_keeps_is_made_from_the_bytes() -> None:
    """The process that read the body is asked for it first; when it keeps it no more
    (another body was read there since), the translation is made from the bytes."""
    bodies = BodyPool(1, 1)
    seen: list[str] = []
    real = bodies.placed

    async def recorded(group: int, where: int | None, function: Any, *args: Any) -> Any:
        seen.append(function.__name__)
        return await real(group, where, function, *args)

    bodies.placed = recorded  # type: ignore[method-assign]
    codec = Codec("gemini")
    try:
        _, _, kept = await read_chat(orjson.dumps(CHAT), 7, bodies, 1024)
        _, _, replaced = await read_chat(orjson.dumps(CHAT), 7, bodies, 1024)
        first, second = await kept.translated(codec), await replaced.translated(codec)
    finally:
        bodies.close()
    assert first.payload.keys() == second.payload.keys()
    assert seen == ["read_chat_apart"] * 2 + ["translate_kept", "translate_apart"] + [
        "translate_kept"
    ]


async def test_each_channel_type_names_the_codec_its_adapter_writes_in() -> None:
    http = HttpClient()
    try:
        registry = ProviderRegistry.default(http, default_max_tokens=333)
        aws = AwsSettings(region="us-east-1", access_key_id="AKIAFAKE", secret_access_key="b")
        tool = aws.model_copy(update={"structured_output": "tool"})

        def codec(type_name: str, model: str, options: Any = None) -> Codec | None:
            target = Target("c", "http://upstream", None, model, 1, 1, options=options)
            return registry.codec(type_name, target)

        assert codec("openai", "gpt") is None
        assert codec("azure-openai", "gpt") is None
        assert codec("anthropic", "claude") == Codec("anthropic", 333)
        assert codec("gemini", "gemini-2.5-pro") == Codec("gemini")
        assert codec("vertex", "gemini-2.5-pro") == Codec("gemini", remote_images=True)
        assert codec("vertex", "claude-sonnet-4") == Codec("anthropic", 333)
        assert codec("bedrock", "m", aws) == Codec("bedrock")
        assert codec("bedrock", "m", tool) == Codec("bedrock", structured="tool")
    finally:
        await http.close()


def test_a_chat_body_is_read_alike_whichever_path_each_message_takes() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    messages = [
        {"role": "user", "content": "abcd" * 3},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
        {"role": "user", "content": [{"type": "text", "text": "abcde"}, image]},
        {"role": "tool", "content": ""},
    ]
    text, images = parse_chat_apart({"model": "m", "messages": messages}, 100, 10)
    assert text.prompt_estimate == 3 + 4 * 4 + 3 + 0 + (2 + TOKENS_PER_IMAGE) + 0
    assert text.prompt_ceiling == 100 + TEMPLATE_TOKENS + IMAGE_TOKENS_CEILING
    assert images == Images("messages[2].content[1]", None)
    assert parse_chat({"model": "m", "messages": messages}, 100) == text
    assert openai_chat.read_messages(messages)[0] == text.prompt_estimate  # one pass, alike
    bad = [*messages, {"role": "user", "content": 7}]
    with pytest.raises(InvalidRequest) as refused:
        parse_chat_apart({"model": "m", "messages": bad}, 100, 10)
    assert refused.value.param == "messages[4].content"


def test_a_messages_body_is_estimated_and_its_images_counted_in_one_pass() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    messages = [
        {"role": "user", "content": "abcd" * 3},
        {"role": "assistant", "content": [{"type": "text", "text": "abcde"}]},
        {"role": "user", "content": [image, {"type": "text", "text": "and"}, image]},
    ]
    body = {"model": "m", "max_tokens": 5, "messages": messages, "system": "be"}
    read = parse_messages(body, None, 100)
    assert (read.prompt_estimate, read.images) == (
        3 + 4 + 3 + 4 + 2 + 4 + 2 * TOKENS_PER_IMAGE + 1 + 1,
        2,
    )
    assert parse_count(body, None).images == 2
