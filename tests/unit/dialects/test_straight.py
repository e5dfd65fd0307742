"""Plain texts written straight through are what the long way writes, in every dialect:
texts each a message's string content, or the one text block its content lists."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from parley.api import apart
from parley.api.apart import (
    Made,
    Source,
    joined,
    read_chat_apart,
    read_messages_apart,
    translate_apart,
)
from parley.api.body import decode_with_texts
from parley.api.chat_request import parse_chat, parse_chat_apart
from parley.api.messages_request import parse_messages
from parley.api.refusal import Refusal
from parley.dialects.outbound import Codec
from parley.dialects.straight import MARKS, Plain, marked_messages, plain_texts, straight
from parley.errors import InvalidRequest

TEXTS = [
    "plain",
    'a "quoted", "listed" text',
    '","',
    "back\\slash",
    '\\",\\" ',
    "ünïcødé 文字 🙂",
    " ",
    "line\nbreak\ttab\x01",
    "x" * 300,
]
CODECS: list[Codec | None] = [
    Codec("anthropic", 512),
    Codec("gemini"),
    Codec("gemini", remote_images=True),
    Codec("bedrock"),
    Codec("bedrock", structured="tool"),
    None,
]


SHAPES = [None, "text"]
"""How a message holds its text: its content (``None``), or a text block its content lists."""


def _user(texts: list[str], block: str | None = None) -> list[dict[str, Any]]:
    if block is None:
        return [{"role": "user", "content": text} for text in texts]
    return [{"role": "user", "content": [{"type": block, "text": text}]} for text in texts]


def _bodies(source: Source, block: str | None) -> list[dict[str, Any]]:
    if source == "chat":
        options: dict[str, Any] = {"temperature": 0.5, "max_tokens": 30}
        system = [{"role": "system", "content": "be brief"}]
        return [
            {"model": "m", "messages": _user(TEXTS[:2], block), **options},
            {"model": "m", "messages": _user(TEXTS, block), "stop": ["END"], **options},
            {"model": "m", "messages": _user(TEXTS * 3, block), "user": "u-1"},
            {"model": "m", "messages": system + _user(TEXTS, block)},  # not plain: the long way
            {"model": "m", "messages": _user(TEXTS) + _user(TEXTS, "text")},  # the long way
        ]
    return [
        {"model": "m", "max_tokens": 9, "messages": _user(TEXTS[:2], block)},
        {"model": "m", "max_tokens": 9, "messages": _user(TEXTS, block), "system": "be brief"},
        {"model": "m", "max_tokens": 9, "messages": _user(TEXTS * 3, block), "temperature": 0.2},
        {"model": "m", "max_tokens": 9, "messages": _user(TEXTS, "text") + _user(TEXTS)},
    ]


def _opened(made: Any) -> tuple[Any, bool]:
    assert isinstance(made, Made), made
    return orjson.loads(orjson.dumps(joined(made.body))), made.json_tool


def _long_way(body: dict[str, Any], source: Source, codec: Codec | None) -> tuple[Any, bool]:
    payload, json_tool = apart._written(body, source, codec, False)
    return orjson.loads(orjson.dumps(payload)), json_tool


ROUTES: list[tuple[Source, Codec | None]] = [
    *(("chat", codec) for codec in CODECS if codec is not None),  # None: it goes as it came
    *(("messages", codec) for codec in CODECS),
]


@pytest.mark.parametrize("block", SHAPES)
@pytest.mark.parametrize(("source", "codec"), ROUTES, ids=repr)
def test_plain_texts_are_written_straight_as_the_long_way_writes_them(
    source: Source, codec: Codec | None, block: str | None
) -> None:
    straights = 0
    for body in _bodies(source, block):
        made = translate_apart(orjson.dumps(body), source, codec, False)
        assert _opened(made) == _long_way(body, source, codec)
        plain = plain_texts(body["messages"], "text")
        if plain is not None:  # and it was written straight, not the long way again
            assert plain.block == block
            marked = {**body, "messages": marked_messages(plain.block)}
            payload = apart._written(marked, source, codec, False)[0]
            assert straight(payload, plain.texts) is not None
            straights += 1
    assert straights == 3


@pytest.mark.parametrize("block", ["text", "input_text"])
def test_only_a_run_of_a_users_plain_texts_is_plain(block: str) -> None:
    assert plain_texts(_user(["a", "b"]), block) == Plain(["a", "b"], None)
    assert plain_texts(_user(["a", "b"], block), block) == Plain(["a", "b"], block)
    other = "input_text" if block == "text" else "text"
    for messages in (
        _user(["a"]),
        _user(["a"], block),
        _user(["a", ""]),
        _user(["a", ""], block),
        _user(["a", "b"], other),
        [*_user(["a"]), {"role": "assistant", "content": "b"}],
        [*_user(["a"], block), {"role": "assistant", "content": [{"type": block, "text": "b"}]}],
        [*_user(["a"]), {"role": "user", "content": "b", "name": "n"}],
        [*_user(["a"]), {"role": "user", "content": [{"type": block, "text": "b"}]}],
        [*_user(["a"], block), {"role": "user", "content": "b"}],
        [*_user(["a"], block), {"role": "user", "content": [{"type": block, "text": 1}]}],
        [*_user(["a"], block), {"role": "user", "content": [{"type": block}]}],
        [*_user(["a"], block), {"role": "user", "content": [{"type": block, "text": "b", "x": 1}]}],
        [*_user(["a"], block), {"role": "user", "content": [{"type": block, "t": "b"}]}],
        [
            *_user(["a"], block),
            {"role": "user", "content": _user(["b", "c"], block)[0]["content"] * 2},
        ],
        [*_user(["a"], block), {"role": "user", "content": []}],
        [*_user(["a"], block), {"role": "user", "content": ["b"]}],
        [*_user(["a"]), "b"],
        [*_user(["a"], block), "b"],
        "ab",
        None,
    ):
        assert plain_texts(messages, block) is None, messages


def test_a_mark_written_anywhere_else_sends_the_body_the_long_way() -> None:
    written = {"messages": [{"role": "user", "content": [{"text": mark} for mark in MARKS]}]}
    assert straight(written, ["a", "b", "c"]) is not None
    assert straight({**written, "system": MARKS[0]}, ["a", "b"]) is None
    unlike = {"messages": [{"role": "user", "content": [{"text": MARKS[0]}, {"t": MARKS[1]}]}]}
    assert straight(unlike, ["a", "b"]) is None
    assert straight({"messages": []}, ["a", "b"]) is None


@pytest.mark.parametrize("block", SHAPES)
def test_what_an_upstream_cannot_say_is_refused_straight_as_the_long_way(
    block: str | None,
) -> None:
    body = {"model": "m", "messages": _user(TEXTS, block), "temperature": 1.5}
    refused = translate_apart(orjson.dumps(body), "chat", Codec("anthropic", 512), False)
    assert refused == Refusal(
        InvalidRequest, "Anthropic models take a temperature from 0 to 1.", "temperature", None
    )


@pytest.mark.parametrize("block", SHAPES)
def test_a_bad_body_of_plain_texts_is_refused_naming_its_field(block: str | None) -> None:
    messages = _user(TEXTS, block)
    chat = read_chat_apart(orjson.dumps({"messages": messages}), 10)
    assert isinstance(chat, Refusal) and chat.param == "model"
    body = {"model": "m", "messages": messages, "max_tokens": 0}
    refused = read_messages_apart(orjson.dumps(body), None, False)
    assert isinstance(refused, Refusal) and refused.param == "max_tokens"


@pytest.mark.parametrize("block", SHAPES)
def test_a_body_of_plain_texts_is_still_measured_for_depth_elsewhere(block: str | None) -> None:
    deep: Any = "bottom"
    for _ in range(80):
        deep = [deep]
    plain = {"model": "m", "messages": _user(["a", "b"], block)}
    body, texts = decode_with_texts(orjson.dumps(plain), "messages")
    assert (body, texts) == (plain, Plain(["a", "b"], block))
    with pytest.raises(InvalidRequest) as refused:
        decode_with_texts(orjson.dumps({**plain, "stop": deep}), "messages")
    assert refused.value.code == "json_too_deep"
    nested = [*_user(["a"], block), {"role": "user", "content": deep}]
    with pytest.raises(InvalidRequest) as refused:
        decode_with_texts(orjson.dumps({**plain, "messages": nested}), "messages")
    assert refused.value.code == "json_too_deep"
    blocks = [*_user(["a"], block), {"role": "user", "content": [{"type": "text", "text": deep}]}]
    with pytest.raises(InvalidRequest) as refused:
        decode_with_texts(orjson.dumps({**plain, "messages": blocks}), "messages")
    assert refused.value.code == "json_too_deep"


@pytest.mark.parametrize("block", SHAPES)
def test_plain_texts_are_estimated_as_the_messages_they_are(block: str | None) -> None:
    body = {"model": "m", "messages": _user(TEXTS, block)}
    plain = plain_texts(body["messages"], "text")
    assert plain is not None
    read, images = parse_chat_apart(body, 100, 10, plain.texts)
    assert read == parse_chat(body, 100)
    assert (
        read.prompt_estimate
        == parse_chat({"model": "m", "messages": _user(TEXTS)}, 100).prompt_estimate
    )
    assert images.first is None
    chat = read_chat_apart(orjson.dumps(body), 10)
    assert not isinstance(chat, Refusal) and chat.text.prompt_estimate == read.prompt_estimate
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    messages = {**body, "max_tokens": 9, "system": [{"type": "text", "text": "brief"}]}
    for asked in (messages, {**messages, "tools": tools}):
        raw = orjson.dumps(asked)
        long_way = parse_messages(asked, None, len(raw))
        for counting in (False, True):
            made = read_messages_apart(raw, None, counting)
            assert not isinstance(made, Refusal)
            assert (made.messages.prompt_estimate, made.messages.images) == (
                long_way.prompt_estimate,
                0,
            )


@pytest.mark.parametrize(
    "texts", [["a", 'b",', "c"], ["a", "b\\", "c"], ["a", 'b\\",', "c"], [",", "b", ","]], ids=repr
)
def test_texts_that_look_like_where_a_list_is_split_are_written_the_long_way(
    texts: list[str],
) -> None:
    """A text that ends in ``",`` serializes to what a list puts between two texts, one
    that ends in a backslash comes close, and so does a first text that is a comma:
    none is written straight."""
    codec = Codec("anthropic", 512)
    for block in SHAPES:
        body = {"model": "m", "messages": _user(texts, block), "max_tokens": 30}
        marked = {**body, "messages": marked_messages(block)}
        assert straight(apart._written(marked, "chat", codec, False)[0], texts) is None
        made = translate_apart(orjson.dumps(body), "chat", codec, False)
        assert _opened(made) == _long_way(body, "chat", codec)
        [turn] = _opened(made)[0]["messages"]
        assert [part["text"] for part in turn["content"]] == texts


@pytest.mark.parametrize("block", SHAPES)
@pytest.mark.parametrize(("source", "codec"), ROUTES, ids=repr)
def test_texts_of_any_characters_are_written_straight_as_the_long_way(
    source: Source, codec: Codec | None, block: str | None
) -> None:
    """Texts drawn from the characters JSON escapes (quotes, backslashes, commas,
    control characters) next to plain and wide ones: the two ways always agree."""
    draw = random.Random(32)
    alphabet = ['"', '"', "\\", "\\", ",", ",", "x", " ", "\x00", "\x1f", "\n", "é", "🙂", "u"]
    for _ in range(1500):
        texts = [
            "".join(draw.choice(alphabet) for _ in range(draw.randint(1, 4)))
            for _ in range(draw.randint(2, 6))
        ]
        body = {"model": "m", "messages": _user(texts, block), "max_tokens": 30}
        made = translate_apart(orjson.dumps(body), source, codec, False)
        assert _opened(made) == _long_way(body, source, codec), texts
