"""Embedding vectors in OpenAI's two encodings: a JSON array of numbers (``float``), or
the base64 of the vector as little-endian float32 numbers (``base64``).

An upstream may ignore the ``encoding_format`` it was sent; ``encoded`` turns what it
gave into what the caller asked for, so a client that decodes base64 never reads an
array of numbers as bytes (openai-node then finds an empty vector) and one that asked
for numbers never gets a string.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Literal

Encoding = Literal["float", "base64"]
FLOAT32_BYTES = 4


class NotAVector(ValueError):
    """The value is neither an array of numbers nor base64 of float32 numbers."""


def encoded(vector: object, encoding: Encoding) -> list[float] | str:
    """``vector`` (either encoding) in ``encoding``: as it is when already so (unchecked,
    as a relay passes it), converted otherwise; ``NotAVector`` if it cannot be."""
    if isinstance(vector, str):
        return vector if encoding == "base64" else floats_of(vector)
    if isinstance(vector, list):
        return vector if encoding == "float" else base64_of(vector)
    raise NotAVector("an embedding must be an array of numbers or a base64 string")


def base64_of(numbers: list[float]) -> str:
    """The numbers as float32, little-endian, in base64."""
    try:
        packed = struct.pack(f"<{len(numbers)}f", *numbers)
    except struct.error:
        raise NotAVector("an embedding array holds something other than numbers") from None
    except OverflowError:
        raise NotAVector("an embedding array holds a number too large for float32") from None
    return base64.b64encode(packed).decode("ascii")


def floats_of(text: str) -> list[float]:
    """The float32 numbers a base64 string holds, little-endian."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise NotAVector("an embedding string is not base64") from None
    if len(raw) % FLOAT32_BYTES:
        raise NotAVector("an embedding string does not hold whole float32 numbers")
    return list(struct.unpack(f"<{len(raw) // FLOAT32_BYTES}f", raw))
