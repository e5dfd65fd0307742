"""The fake engine's ``POST /v1/embeddings`` reply: deterministic vectors, OpenAI's shape.

Each input (a string, a token array) gets ``dimensions`` numbers (default
``DEFAULT_DIMENSIONS``) drawn from the SHA-256 of the input, so the same input always
gets the same vector and different inputs differ. ``encoding_format: base64`` returns
each vector as little-endian float32 bytes in base64, as OpenAI does; ``encoding``, when
given, is used whatever the request asked (an engine that ignores the field);
``"broken"`` sends a string that is not base64. Usage: one prompt
token per whitespace-separated word of a string, or per token of a token array;
omitted with the ``no-usage`` knob.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from typing import Any

DEFAULT_DIMENSIONS = 8
JSON = dict[str, Any]


def inputs_of(value: Any) -> list[Any]:
    """The items embedded: a string or one token array is one item; else each element."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(x, int) for x in value):
        return [value]
    return list(value) if isinstance(value, list) else []


def vector(item: Any, dimensions: int) -> list[float]:
    seed = hashlib.sha256(repr(item).encode()).digest()
    numbers = []
    for index in range(dimensions):
        byte = seed[index % len(seed)] ^ (index * 31 % 256)
        numbers.append(round(byte / 127.5 - 1.0, 6))
    return numbers


def tokens(item: Any) -> int:
    return len(item.split()) if isinstance(item, str) else len(item)


def embedding_reply(body: JSON, with_usage: bool, encoding: str | None = None) -> JSON:
    dimensions = body.get("dimensions") or DEFAULT_DIMENSIONS
    items = inputs_of(body.get("input"))
    data = []
    for index, item in enumerate(items):
        numbers = vector(item, dimensions)
        encoded: Any = numbers
        if (encoding or body.get("encoding_format")) == "base64":
            packed = struct.pack(f"<{len(numbers)}f", *numbers)
            encoded = base64.b64encode(packed).decode("ascii")
        if encoding == "broken":
            encoded = "%%% not base64 %%%"
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    reply: JSON = {"object": "list", "data": data, "model": body.get("model")}
    if with_usage:
        count = sum(tokens(item) for item in items)
        reply["usage"] = {"prompt_tokens": count, "total_tokens": count}
    return reply
