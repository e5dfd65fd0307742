"""Plain texts written straight through: a large body's run of user text, without a
Python object per item.

A body of many messages that are each a user's text (an object of a ``role`` and a
``content``, nothing else, the content a string or a list of one text block: the shapes
a body of hundreds of thousands of items takes) costs, the long way, a canonical
``Text`` per message and a written part per ``Text``, and an upstream's body is the
same each time but for the texts. So the call is written the long way once for two
``MARKS`` in place of the texts, held as the texts are, which shows how
the upstream's dialect writes a text (an Anthropic ``{"type": "text", "text": ...}``
part, a Gemini ``{"text": ...}``, a chat message...) and in which list; the texts
themselves are serialized in one ``orjson.dumps`` and written into that list in the
same form (``straight``). Everything else in the body (its options, its system
prompt, what is refused) is what the long way makes of it, since it is the long way's
own output.

A body whose writing does not hold each mark exactly once, in the last two elements of
one list and written alike (a caller's other field that spells a mark, a dialect that
writes a text twice or not as it came), is written the long way instead, as is a body
of any other shape. Only body processes use this (``api/apart.py``,
``api/responses_apart.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import orjson

from parley.domain.tokens import CHARS_PER_TOKEN
from parley.domain.value import value
from parley.domain.wire import JSON

MARKS = ("\x00parley straight a\x00", "\x00parley straight b\x00")
MARKED = tuple(orjson.dumps(mark) for mark in MARKS)
"""The marks as they are written in JSON (each control character escaped)."""
BETWEEN = b'","'
"""What ``orjson.dumps`` writes between two strings of a list. A quote inside a string is
written escaped, so ``BETWEEN`` is found elsewhere only where its first quote is escaped
(a text that ends in ``",``: ``AMBIGUOUS`` shows it) or opens a text that is a comma
alone (found before the list's first separator only when the first text is that)."""
AMBIGUOUS = b'\\","'
"""``BETWEEN`` after a backslash: an escaped quote inside a text that ends in ``",``, or
a text that ends in a backslash. Texts that show it are written the long way."""


@value
class Plain:
    """A run of a user's texts (``plain_texts``), and how each message holds its text:
    as its ``content`` (``block`` is ``None``), or as the one text block its ``content``
    lists (``{"type": block, "text": ...}``)."""

    texts: list[str]
    block: str | None


def plain_texts(messages: Any, block: str) -> Plain | None:
    """The texts of ``messages`` when there are at least two and each is a user's text
    (an object of ``role: "user"`` and a ``content``, nothing else), all held alike: a
    non-empty string ``content``, or a ``content`` that lists one block of ``block``'s
    type and a non-empty string ``text``, nothing else; else ``None``. One comprehension,
    then tests in C (``map``, ``all``)."""
    if messages.__class__ is not list or len(messages) < 2:
        return None
    first = messages[0]
    shape = block if first.__class__ is dict and first.get("content").__class__ is list else None
    if shape is None:
        texts = [
            message.get("content")
            for message in messages
            if message.__class__ is dict and len(message) == 2 and message.get("role") == "user"
        ]
    else:
        texts = [
            part.get("text")
            for message in messages
            if message.__class__ is dict
            and len(message) == 2
            and message.get("role") == "user"
            and (content := message.get("content")).__class__ is list
            and len(content) == 1
            and (part := content[0]).__class__ is dict
            and len(part) == 2
            and part.get("type") == block
        ]
    if len(texts) != len(messages) or set(map(type, texts)) != {str} or not all(texts):
        return None
    return Plain(cast(list[str], texts), shape)


def marked_messages(block: str | None) -> list[JSON]:
    """The two marked user messages a call is written with in place of its texts, each
    holding its mark as a ``Plain`` of ``block`` holds a text."""
    if block is None:
        return [{"role": "user", "content": mark} for mark in MARKS]
    return [{"role": "user", "content": [{"type": block, "text": mark}]} for mark in MARKS]


def estimate(texts: list[str]) -> int:
    """The texts' tokens as ``openai_chat.read_messages`` counts a string content or a
    text part (and ``anthropic_messages.estimate_prompt`` a string content or a text
    block): a token per four characters of each, rounded up."""
    return sum([(len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN for text in texts])


def straight(written: JSON, texts: list[str]) -> tuple[str, bytes] | None:
    """``written`` (an upstream's body written for the two ``MARKS``) for ``texts``: the
    name of the top-level field that holds the marked list, and that field serialized
    with one element per text in the marks' form. ``None`` when the marks are not
    where and as expected (the body is then written the long way)."""
    first_mark, second_mark = MARKED
    everything = orjson.dumps(written)
    if everything.count(first_mark) != 1 or everything.count(second_mark) != 1:
        return None  # a mark written twice (into another field too), or not at all
    for name, field in written.items():
        if field.__class__ is not list:
            continue
        whole = orjson.dumps(field)
        if first_mark not in whole:
            continue
        run = _marked_run(field)
        if run is None:
            return None
        before, first = orjson.dumps(run[:-2])[1:-1], orjson.dumps(run[-2])
        if first.count(first_mark) != 1 or first.replace(first_mark, second_mark) != (
            orjson.dumps(run[-1])
        ):
            return None
        listed = orjson.dumps(texts)[1:-1]
        if AMBIGUOUS in listed or texts[0] == ",":
            return None
        head, _, tail = first.partition(first_mark)
        texts_written = listed.replace(BETWEEN, b'"' + tail + b"," + head + b'"')
        elements = head + texts_written + tail
        marked = orjson.dumps(run)
        if whole.count(marked) != 1:
            return None
        return name, whole.replace(
            marked, b"[" + (before + b"," if before else b"") + elements + b"]"
        )
    return None


def _marked_run(value: list[Any]) -> list[Any] | None:
    """The list, ``value`` or one inside an element of it, whose last two elements hold
    the marks (one each)."""
    for candidate in _lists(value):
        if len(candidate) >= 2:
            last_two = orjson.dumps(candidate[-2:])
            first_mark, second_mark = MARKED
            if (
                last_two.count(first_mark) == 1
                and last_two.count(second_mark) == 1
                and first_mark in orjson.dumps(candidate[-2])
            ):
                return candidate
    return None


def _lists(value: list[Any]) -> Iterator[list[Any]]:
    """``value``, then the lists in its elements' fields (a message's parts)."""
    yield value
    for element in value:
        if element.__class__ is dict:
            for inner in element.values():
                if inner.__class__ is list:
                    yield inner
