"""JSON as an upstream sends it: parsed by ``orjson``, and never deeper than Parley writes.

``orjson`` reads arrays and objects nested up to 1024 levels but writes no more than 255,
so a reply nested in between would be read, then fail on its way to the caller. RFC 8259
lets a parser bound nesting; here the bound is ``MAX_DEPTH``, far beyond any real reply
and with room for what Parley wraps around an upstream's values (a speech event's usage,
another dialect's content blocks). Deeper JSON is refused where it is read, as invalid
JSON (``orjson.JSONDecodeError``): every adapter already takes that for a broken reply,
a 502 or a stream's error event, and no serializer meets it.

The check costs JSON that cannot be that deep a ``len``: ``MAX_DEPTH`` levels take twice
as many bytes (``SHALLOW_BYTES``), more than a streamed chunk usually holds; longer JSON
counts its opening brackets, and only JSON with more openers than ``MAX_DEPTH`` is
measured, on its brackets alone (``nesting``).
"""

from __future__ import annotations

import array
import itertools
from typing import Any

import orjson

MAX_DEPTH = 200
SHALLOW_BYTES = 2 * MAX_DEPTH
"""JSON no longer than this cannot nest deeper than ``MAX_DEPTH``."""
_MARKS = b'"[]{}'
_NOT_MARKS = bytes(sorted(set(range(256)) - set(_MARKS)))
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
"""Each bracket as a signed byte: +1 opens a level, -1 closes one."""


def loads(raw: bytes | str) -> Any:
    """``orjson.loads`` for what an upstream sent; JSON nested deeper than ``MAX_DEPTH``
    raises ``orjson.JSONDecodeError`` like any other JSON Parley cannot take."""
    value = orjson.loads(raw)
    if len(raw) > SHALLOW_BYTES and too_deep(raw):
        raise orjson.JSONDecodeError(f"nested deeper than {MAX_DEPTH} levels", "", 0)
    return value


def too_deep(raw: bytes | str) -> bool:
    """Whether valid JSON ``raw`` nests arrays and objects deeper than ``MAX_DEPTH``."""
    data = raw.encode() if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return False
    return nesting(data) > MAX_DEPTH


def nesting(data: bytes) -> int:
    """How deep the arrays and objects of valid JSON ``data`` nest: its brackets outside
    strings, summed as steps. Escapes go first (an escaped backslash, then an escaped
    quote), so every quote left opens or closes a string."""
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    strings_apart = data.translate(None, _NOT_MARKS).split(b'"')
    brackets = b"".join(strings_apart[::2]).translate(_STEPS)
    return max(itertools.accumulate(array.array("b", brackets)), default=0)
