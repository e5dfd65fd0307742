"""A large ``POST /v1/responses`` body, read in a body process (``runtime/body_pool``).

``read_apart`` runs there: it decodes the body and reads it with ``parse_responses``,
as the serving process reads a small one, and hands back the ``ResponsesRequest`` with
its bulk serialized: the ``input`` as it came, the chat body's ``messages`` and the
input items with ids, each one ``bytes``. The serving process wraps them as
``orjson.Fragment`` values (``opened``), which ``orjson.dumps`` writes out as they are: a
channel that takes the chat body (OpenAI-compatible) or the Responses body (native) as
it is gets it without the serving process ever holding the items as objects, and so
does the stored response. A channel of another dialect (Anthropic, Gemini, Bedrock)
gets the canonical call written in its dialect in a body process too, from the chat
body's messages (``api/apart.py``, ``Large``): the serving process never reads them.

A body that continues a stored response (``previous_response_id``, an
``item_reference``) reads the database on its way, which only the serving process can:
``read_apart`` answers ``None`` and the serving process reads it itself.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Coroutine
from typing import TypeVar, cast

import orjson

from parley.api.body import decode_json, decode_with_texts
from parley.api.refusal import Refusal
from parley.api.responses_request import ResponsesRequest, parse_responses
from parley.api.textgen import TextRequest
from parley.dialects.openai_responses import normalized_input
from parley.dialects.straight import MARKED, MARKS, Plain, marked_messages, straight
from parley.dialects.straight import estimate as straight_estimate
from parley.domain.tokens import prompt_ceiling
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import ParleyError
from parley.runtime.body_pool import BodyPool
from parley.runtime.response_book import ResponseBook

T = TypeVar("T")
NO_BOOK = cast(ResponseBook, None)
"""What a body process reads a body with: one that names no stored response, so that
``parse_responses`` never reads the book."""
ASCII_ESCAPE = re.compile(rb"\\u00[2-7]")
"""An escape that can stand for a printable ASCII character, in a JSON text."""


@value
class Sealed:
    """A ``ResponsesRequest`` whose bulk is serialized: ``parsed`` holds ``None`` where
    ``input``, ``messages`` and ``items`` were, and no refusal (``refusal`` has it)."""

    parsed: ResponsesRequest
    input: bytes
    messages: bytes | None
    items: bytes
    refusal: Refusal | None


async def read_responses(
    raw: bytes, group_id: int, bodies: BodyPool, large_bytes: int, book: ResponseBook
) -> ResponsesRequest:
    """The body read whole: in a body process when it is larger than ``large_bytes``
    (and names no stored response), else here."""
    if len(raw) > large_bytes:
        read = await bodies.run(group_id, read_apart, raw, group_id)
        if isinstance(read, Refusal):
            raise read.error()
        if read is not None:
            return opened(read)
    return await parse_responses(decode_json(raw), len(raw), group_id, book)


def read_apart(raw: bytes, group_id: int) -> Sealed | Refusal | None:
    """The body read as ``parse_responses`` reads it, its bulk serialized; a ``Refusal``
    where it is refused; ``None`` when it continues a stored response. An ``input`` of
    a user's plain texts (strings, or ``input_text`` blocks) has its chat body's messages
    written straight through (``dialects/straight.py``)."""
    try:
        body, plain = decode_with_texts(raw, "input", "input_text")
        if _may_continue(body, raw) and _continues(body):
            return None
        if plain is not None:
            sealed = _read_straight(body, len(raw), group_id, plain)
            if sealed is not None:
                return sealed
        parsed = _without_waiting(parse_responses(body, len(raw), group_id, NO_BOOK))
    except ParleyError as error:
        return Refusal.of(error)
    chat = parsed.chat
    messages = None if chat is None else orjson.dumps(chat["messages"])
    items = orjson.dumps(parsed.items) if parsed.store else b"[]"  # kept only to store
    return _sealed(parsed, body, parsed.text, messages, items)


def _read_straight(body: JSON, body_bytes: int, group_id: int, plain: Plain) -> Sealed | None:
    """``read_apart`` of a body whose ``input`` is ``plain``'s texts, each a user's
    message: the body read with two marked messages in their place, held as the texts
    are (all but the input checked, the options and the call's chat body made, as for
    any body), then its chat body's messages written for the texts, and its estimate
    made theirs. ``None`` when the chat body is not one to write so (the body is then
    read whole)."""
    texts = plain.texts
    marked = {**body, "input": marked_messages(plain.block)}
    parsed = _without_waiting(parse_responses(marked, body_bytes, group_id, NO_BOOK))
    written = None if parsed.chat is None else straight(parsed.chat, texts)
    if written is None or written[0] != "messages" or not _one_message(parsed.chat):
        return None
    text = parsed.text  # its framing a message's, whatever the texts: one message holds them
    estimate = text.prompt_estimate - straight_estimate(list(MARKS)) + straight_estimate(texts)
    text = dataclasses.replace(
        text,
        body=body,
        prompt_estimate=estimate,
        prompt_ceiling=max(estimate, prompt_ceiling(body_bytes, parsed.images)),
    )
    items = orjson.dumps(normalized_input(body["input"])) if parsed.store else b"[]"
    return _sealed(parsed, body, text, written[1], items)


def _one_message(chat: JSON | None) -> bool:
    """Whether the last of ``chat``'s messages holds both marks (the texts are parts of
    one message, not a message each: the estimate's framing does not grow with them)."""
    last = orjson.dumps(chat["messages"][-1]) if chat and chat.get("messages") else b""
    return all(mark in last for mark in MARKED)


def _sealed(
    parsed: ResponsesRequest, body: JSON, text: TextRequest, messages: bytes | None, items: bytes
) -> Sealed:
    """``parsed`` (of ``body``, its request ``text``) with its bulk serialized."""
    shown = {**body, "input": None}
    chat = parsed.chat
    refusal = None if parsed.refusal is None else Refusal.of(parsed.refusal)
    hollow = dataclasses.replace(
        parsed,
        body=shown,
        items=[],
        chat=None if chat is None else {**chat, "messages": None},
        refusal=None,
        text=dataclasses.replace(text, body=shown),
        request=None,
    )
    return Sealed(hollow, orjson.dumps(body["input"]), messages, items, refusal)


def _without_waiting(reading: Coroutine[object, object, T]) -> T:
    """What a coroutine that never waits returns, run without an event loop.

    ``asyncio.run`` would do, but in a process's main thread it sets and restores a
    SIGINT handler that holds the task, and restoring it builds the task's repr, with
    the whole result's: for a body of a million items, seconds of work to throw away."""
    try:
        reading.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    reading.close()
    raise RuntimeError("parse_responses waited on something in a body process")


def _may_continue(body: JSON, raw: bytes) -> bool:
    """Whether the body can continue a stored response (``_continues`` says whether it
    does): it names a previous response, or its bytes spell ``item_reference`` or hold
    an escaped ASCII character (which could spell it). A search of the bytes, so that a
    body of a million items is not walked item by item for it."""
    if body.get("previous_response_id") is not None or b"item_reference" in raw:
        return True
    return ASCII_ESCAPE.search(raw) is not None


def _continues(body: JSON) -> bool:
    if body.get("previous_response_id") is not None:
        return True
    given = body.get("input")
    return isinstance(given, list) and any(
        isinstance(item, dict) and item.get("type") == "item_reference" for item in given
    )


def opened(sealed: Sealed) -> ResponsesRequest:
    """The request the serving process calls with: the bulk as ``orjson.Fragment``."""
    hollow = sealed.parsed
    body = {**hollow.body, "input": orjson.Fragment(sealed.input)}
    chat = hollow.chat
    if chat is not None and sealed.messages is not None:
        chat = {**chat, "messages": orjson.Fragment(sealed.messages)}
    refusal = None if sealed.refusal is None else sealed.refusal.error()
    return dataclasses.replace(
        hollow,
        body=body,
        items=orjson.Fragment(sealed.items),
        chat=chat,
        refusal=refusal,
        text=dataclasses.replace(hollow.text, body=body),
    )
