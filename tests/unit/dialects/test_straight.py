"""Plain texts written straight through are what the long way writes, in every dialect."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from parley.api import apart
from parley.api.apart import Made, Source, joined, translate_apart
from parley.api.body import decode_with_texts
from parley.api.chat_request import parse_chat, parse_chat_apart
from parley.api.refusal import Refusal
from parley.dialects.outbound import Codec
from parley.dialects.straight import MARKS, marked_messages, plain_texts, straight
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


def _user(texts: list[str]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text} for text in texts]


def _bodies(source: Source) -> list[dict[str, Any]]:
    if source == "chat":
        options: dict[str, Any] = {"temperature": 0.5, "max_tokens": 30}
        system = [{"role": "system", "content": "be brief"}]
        return [
            {"model": "m", "messages": _user(TEXTS[:2]), **options},
            {"model": "m", "messages": _user(TEXTS), "stop": ["END"], **options},
            {"model": "m", "messages": _user(TEXTS * 3), "user": "u-1"},
            {"model": "m", "messages": system + _user(TEXTS)},  # not plain: the long way
        ]
    return [
        {"model": "m", "max_tokens": 9, "messages": _user(TEXTS[:2])},
        {"model": "m", "max_tokens": 9, "messages": _user(TEXTS), "system": "be brief"},
        {"model": "m", "max_tokens": 9, "messages": _user(TEXTS * 3), "temperature": 0.2},
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


@pytest.mark.parametrize(("source", "codec"), ROUTES, ids=repr)
def test_plain_texts_are_written_straight_as_the_long_way_writes_them(
    source: Source, codec: Codec | None
) -> None:
    for body in _bodies(source):
        made = translate_apart(orjson.dumps(body), source, codec, False)
        assert _opened(made) == _long_way(body, source, codec)
        texts = plain_texts(body["messages"])
        if texts is not None:  # and it was written straight, not the long way again
            marked = {**body, "messages": marked_messages()}
            assert straight(apart._written(marked, source, codec, False)[0], texts) is not None


def test_only_a_run_of_a_users_plain_texts_is_plain() -> None:
    assert plain_texts(_user(["a", "b"])) == ["a", "b"]
    for messages in (
        _user(["a"]),
        _user(["a", ""]),
        [*_user(["a"]), {"role": "assistant", "content": "b"}],
        [*_user(["a"]), {"role": "user", "content": "b", "name": "n"}],
        [*_user(["a"]), {"role": "user", "content": [{"type": "text", "text": "b"}]}],
        [*_user(["a"]), "b"],
        "ab",
        None,
    ):
        assert plain_texts(messages) is None, messages


def test_a_mark_written_anywhere_else_sends_the_body_the_long_way() -> None:
    written = {"messages": [{"role": "user", "content": [{"text": mark} for mark in MARKS]}]}
    assert straight(written, ["a", "b", "c"]) is not None
    assert straight({**written, "system": MARKS[0]}, ["a", "b"]) is None
    unlike = {"messages": [{"role": "user", "content": [{"text": MARKS[0]}, {"t": MARKS[1]}]}]}
    assert straight(unlike, ["a", "b"]) is None
    assert straight({"messages": []}, ["a", "b"]) is None


def test_what_an_upstream_cannot_say_is_refused_straight_as_the_long_way() -> None:
    body = {"model": "m", "messages": _user(TEXTS), "temperature": 1.5}
    refused = translate_apart(orjson.dumps(body), "chat", Codec("anthropic", 512), False)
    assert refused == Refusal(
        InvalidRequest, "Anthropic models take a temperature from 0 to 1.", "temperature", None
    )


def test_a_body_of_plain_texts_is_still_measured_for_depth_elsewhere() -> None:
    deep: Any = "bottom"
    for _ in range(80):
        deep = [deep]
    plain = {"model": "m", "messages": _user(["a", "b"])}
    body, texts = decode_with_texts(orjson.dumps(plain), "messages")
    assert (body, texts) == (plain, ["a", "b"])
    with pytest.raises(InvalidRequest) as refused:
        decode_with_texts(orjson.dumps({**plain, "stop": deep}), "messages")
    assert refused.value.code == "json_too_deep"
    nested = [*_user(["a"]), {"role": "user", "content": deep}]
    with pytest.raises(InvalidRequest) as refused:
        decode_with_texts(orjson.dumps({**plain, "messages": nested}), "messages")
    assert refused.value.code == "json_too_deep"


def test_plain_texts_are_estimated_as_the_messages_they_are() -> None:
    body = {"model": "m", "messages": _user(TEXTS)}
    read, _ = parse_chat_apart(body, 100, 10, plain_texts(body["messages"]))
    assert read == parse_chat(body, 100)


@pytest.mark.parametrize(
    "texts", [["a", 'b",', "c"], ["a", "b\\", "c"], ["a", 'b\\",', "c"], [",", "b", ","]], ids=repr
)
def test_texts_that_look_like_where_a_list_is_split_are_written_the_long_way(
    texts: list[str],
) -> None:
    """A text that ends in ``",`` serializes to what a list puts between two texts, one
    that ends in a backslash comes close, and so does a first text that is a comma:
    none is written straight."""
    body = {"model": "m", "messages": _user(texts), "max_tokens": 30}
    codec = Codec("anthropic", 512)
    marked = {**body, "messages": marked_messages()}
    assert straight(apart._written(marked, "chat", codec, False)[0], texts) is None
    made = translate_apart(orjson.dumps(body), "chat", codec, False)
    assert _opened(made) == _long_way(body, "chat", codec)
    [turn] = _opened(made)[0]["messages"]
    assert [part["text"] for part in turn["content"]] == texts


@pytest.mark.parametrize(
    ("source", "codec"), [("chat", Codec("anthropic", 512)), ("messages", None)], ids=repr
)
def test_texts_of_any_characters_are_written_straight_as_the_long_way(
    source: Source, codec: Codec | None
) -> None:
    """Texts drawn from the characters JSON escapes (quotes, backslashes, commas,
    control characters) next to plain and wide ones: the two ways always agree."""
    draw = random.Random(32)
    alphabet = ['"', '"', "\\", "\\", ",", ",", "x", " ", "\x00", "\x1f", "\n", "é", "🙂", "u"]
    for _ in range(3000):
        texts = [
            "".join(draw.choice(alphabet) for _ in range(draw.randint(1, 4)))
            for _ in range(draw.randint(2, 6))
        ]
        body = {"model": "m", "messages": _user(texts), "max_tokens": 30}
        made = translate_apart(orjson.dumps(body), source, codec, False)
        assert _opened(made) == _long_way(body, source, codec), texts
