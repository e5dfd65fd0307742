"""Reading and checking request bodies: JSON, and the fields every endpoint shares."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from parley.dialects.straight import Plain, plain_texts
from parley.errors import InvalidRequest, UnsupportedMediaType
from parley.pipeline.context import REQUEST_BODY

JSON_TYPES = frozenset({"application/json", "text/json"})
MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects a body may have.

orjson parses 1,024 levels but serializes only 254, so a deeper pass-through field would
pass validation and fail on its way upstream; 64 is far beyond any real request (tool
schemas included) and well inside what can be sent on.
"""


async def read_json(request: web.Request) -> dict[str, Any]:
    """The body as a JSON object; 415, 413 or 400 otherwise."""
    return decode_json(await read_raw(request))


async def read_raw(request: web.Request) -> bytes:
    """The body's bytes, once its Content-Type says JSON (415 otherwise; 413 past the
    size limit). The bytes are also left on the request (``REQUEST_BODY``), by reference,
    for the content log."""
    if request.content_type not in JSON_TYPES:
        raise UnsupportedMediaType(
            f"Unsupported Content-Type `{request.content_type}`; send application/json."
        )
    raw = await request.read()
    request[REQUEST_BODY] = raw
    return raw


def decode_json(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON object, no deeper than ``MAX_JSON_DEPTH``; 400 otherwise."""
    body = _decoded(raw)
    _check_depth(body, raw)
    return body


def decode_with_texts(
    raw: bytes, field: str, block: str = "text"
) -> tuple[dict[str, Any], Plain | None]:
    """``decode_json``, and the texts of ``body[field]`` when it is a run of a user's
    plain texts, each a string or a ``block`` of text (``dialects.straight.plain_texts``,
    for a body process to write them straight through): such a field is at most five
    levels deep by its shape, so only the rest of the body is measured for depth, and
    the field's items are not walked twice."""
    body = _decoded(raw)
    plain = plain_texts(body.get(field), block)
    _check_depth(body if plain is None else {**body, field: None}, raw)
    return body, plain


def _decoded(raw: bytes) -> dict[str, Any]:
    if not raw:
        raise InvalidRequest("The request body is empty; send a JSON object.")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidRequest(
            "We could not parse the JSON body of your request. It must be a valid JSON object."
        ) from None
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return body


def _check_depth(body: dict[str, Any], raw: bytes) -> None:
    if _nested_deeper_than(body, raw, MAX_JSON_DEPTH):
        raise InvalidRequest(
            f"The JSON body is nested more than {MAX_JSON_DEPTH} levels deep; "
            f"the limit is {MAX_JSON_DEPTH}.",
            code="json_too_deep",
        )


def _nested_deeper_than(body: dict[str, Any], raw: bytes, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` deep (the body is level 1)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:  # too few brackets to go that deep
        return False
    level: list[Any] = [body]
    for _ in range(limit):  # one level at a time: a comprehension a level, not a call a node
        level = [
            child
            for node in level
            for child in (node.values() if type(node) is dict else node)
            if type(child) is dict or type(child) is list
        ]
        if not level:
            return False
    return True


def required_string(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if value is None:
        raise InvalidRequest(f"Missing required parameter: '{name}'.", param=name)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"'{name}' must be a non-empty string.", param=name)
    return value


def optional_bool(body: dict[str, Any], name: str) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRequest(f"'{name}' must be a boolean (true or false).", param=name)
    return value


def optional_positive_int(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"'{name}' must be a positive integer.", param=name)
    return value


def optional_number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequest(f"'{name}' must be a number.", param=name)
    if not low <= value <= high:
        raise InvalidRequest(
            f"'{name}' must be between {low:g} and {high:g}; got {value}.", param=name
        )
    return float(value)


def sampling(body: dict[str, Any], most_temperature: float = 2.0) -> None:
    """Check the sampling parameters every text dialect shares, the same way for each:
    ``temperature`` from 0 to ``most_temperature`` (2 in OpenAI's dialects, 1 in
    Anthropic's) and ``top_p`` from 0 to 1; otherwise a 400 naming the field."""
    optional_number(body, "temperature", 0.0, most_temperature)
    optional_number(body, "top_p", 0.0, 1.0)


def stream_options(body: dict[str, Any], streaming: bool) -> bool:
    """Whether the caller asked for the usage chunk of a stream."""
    options = body.get("stream_options")
    if options is None:
        return False
    if not streaming:
        raise InvalidRequest(
            "'stream_options' is only allowed when 'stream' is true.", param="stream_options"
        )
    if not isinstance(options, dict):
        raise InvalidRequest("'stream_options' must be an object.", param="stream_options")
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise InvalidRequest(
            "'stream_options.include_usage' must be a boolean.", param="stream_options"
        )
    return include
