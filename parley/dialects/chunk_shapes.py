"""A chat stream's content chunks, recognised by their learned shape without parsing them.

The chunks of a chat stream differ only in their text: ``H + "<text>" + T``, where ``H``
and ``T`` (the id, the model, ``created``, the rest of the choice) repeat from one chunk
to the next. The OpenAI relay (``dialects/openai_relay.py``) learns them (``learn``)
from a chunk it parsed the usual way whose one choice's delta holds only a non-empty
string ``content`` (or ``reasoning_content``). A later read that is one event
``data: H"..."T`` is then taken by its string literal alone, parsed on its own
(``orjson`` checks its escapes and UTF-8, and that it is exactly one JSON string:
nothing can hide structure in it), and the relay writes it as its caller's head, the
upstream's literal and its caller's tail.

A shape is what parsing ``H + '""' + T`` gives back: the chunk with an empty text. It is
learned only when that parse, with the text put back, equals the chunk, so a literal
found in the wrong place (another field holding the same text) is never learned.
"""

from __future__ import annotations

import orjson

from parley.domain.wire import JSON


class Shape:
    """A learned chunk shape: the upstream's bytes around its text, as a whole read and
    as one event's data, and the delta ``field`` its text is in (``TEXT_FIELDS``).

    ``head`` is ``data: H`` and ``tail`` is ``T`` and the blank line: what a read that
    starts with one and ends with the other holds between them, at ``[start:len - end]``,
    is its text's literal if it is a quoted JSON string (``literal_between``). ``opening``
    is ``H`` and ``closing`` is ``T``: the same for an event's data (a read of several
    events, split), its literal at ``[at:len - back]``."""

    __slots__ = (
        "_after",
        "_before",
        "at",
        "back",
        "closing",
        "end",
        "field",
        "head",
        "opening",
        "start",
        "tail",
    )

    def __init__(self, before: bytes, after: bytes, field: str = "content") -> None:
        self._before = before
        self.field = field
        self._after = after
        self.head = b"data: " + before
        self.tail = after + b"\n\n"
        self.start = len(self.head)
        self.end = len(self.tail)
        self.opening = before
        self.closing = after
        self.at = len(before)
        self.back = len(after)

    def chunk(self, literal: bytes) -> JSON:
        """The chunk with the text whose JSON string ``literal`` is, as a new dict."""
        chunk: JSON = orjson.loads(self._before + literal + self._after)
        return chunk


TEXT_FIELDS = ("content", "reasoning_content")
"""The delta fields a learnable chunk may hold its text in: those ``StreamTally`` counts,
one string, a piece if not empty."""


def text_of(chunk: JSON) -> tuple[str, str] | None:
    """The field and text of a chunk of the learnable shape (one choice, not finished,
    whose delta holds only a non-empty string in one of ``TEXT_FIELDS``; no ``error``, and
    ``usage`` absent or null: OpenAI and others send ``"usage": null`` on every chunk of a
    stream that asked for usage, as Parley's streams do)."""
    if chunk.get("usage") is not None or "error" in chunk:
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    if choices[0].get("finish_reason") is not None:
        return None  # a stream's last text: no chunk of its shape follows
    delta = choices[0].get("delta")
    if type(delta) is not dict or len(delta) != 1:
        return None
    ((field, text),) = delta.items()
    if field not in TEXT_FIELDS or type(text) is not str or not text:
        return None
    return field, text


def literal_between(data: bytes, head: bytes, tail: bytes) -> bytes | None:
    """What ``data`` holds between ``head`` and ``tail`` when it starts with one, ends
    with the other and that is quoted (the caller checks it is one JSON string, which then
    has nothing around its quotes); ``None`` otherwise (``OpenAIRelay.feed`` writes it
    out, once per read). ``removeprefix`` and ``removesuffix`` take their one argument as
    is, where ``startswith`` parses its arguments first, and a byte compared as a number
    costs no more than a subscript (docs/performance.md, Speed habits)."""
    rest = data.removeprefix(head)
    if rest is data:
        return None
    literal = rest.removesuffix(tail)
    if literal is rest or not literal or literal[0] != QUOTE or literal[-1] != QUOTE:
        return None
    return literal


QUOTE = 34
"""``"``, as the number a byte of ``bytes`` is."""


def learn(payload: bytes, chunk: JSON) -> Shape | None:
    """The shape of ``chunk``, parsed from ``payload`` (one event's data, no line end in
    it), when it has the learnable shape (``text_of``) and its text's literal is found in
    the payload and checked."""
    found = text_of(chunk)
    if found is None:
        return None
    field, text = found
    literal = orjson.dumps(text)  # found only where the upstream escapes as orjson does
    at = payload.rfind(literal)
    if at < 0:
        return None
    shape = Shape(payload[:at], payload[at + len(literal) :], field)
    try:
        empty = shape.chunk(b'""')
        empty["choices"][0]["delta"][field] = text  # what is left must be the chunk
        same = empty == chunk
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
        return None
    return shape if same else None
