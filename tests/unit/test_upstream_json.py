"""JSON an upstream sent is read no deeper than Parley can write it back."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parley.upstream_json import MAX_DEPTH, loads, nesting, too_deep

WRAPPING = 5
"""Levels Parley may put around an upstream's value (a speech event's usage, another
dialect's content blocks): what is read must still be written with them."""


def nested(depth: int) -> bytes:
    """An object holding arrays, ``depth`` levels in all, with brackets in strings around."""
    inner = b"[" * (depth - 1) + b'"]]}\\"[["' + b"]" * (depth - 1)
    return b'{"text": "[[{{ \\"\\\\", "deep": ' + inner + b"}"


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    return 0


def test_json_at_the_bound_is_read_and_can_be_written_back_wrapped() -> None:
    value = loads(nested(MAX_DEPTH))
    assert depth_of(value) == MAX_DEPTH
    wrapped: Any = value
    for _ in range(WRAPPING):
        wrapped = {"around": [wrapped]} if isinstance(wrapped, dict) else {"around": wrapped}
    assert depth_of(wrapped) >= MAX_DEPTH + WRAPPING
    orjson.dumps(wrapped)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 253, 256, 1000])
@pytest.mark.parametrize("as_text", [False, True])
def test_deeper_json_is_invalid_json(depth: int, as_text: bool) -> None:
    raw = nested(depth)
    with pytest.raises(orjson.JSONDecodeError):
        loads(raw.decode() if as_text else raw)


def test_a_long_shallow_reply_is_read() -> None:
    rows = [{"embedding": [0.5] * 8, "index": i, "note": "[[[{{{"} for i in range(MAX_DEPTH * 2)]
    raw = orjson.dumps({"data": rows})
    assert not too_deep(raw)
    assert loads(raw) == {"data": rows}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(alphabet='[]{}"\\ ab\u00e9\n'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), children, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values, ascii_only=st.booleans())
def test_nesting_is_the_depth_of_arrays_and_objects(value: Any, ascii_only: bool) -> None:
    for raw in (orjson.dumps(value), json.dumps(value, ensure_ascii=ascii_only).encode()):
        assert nesting(raw) == depth_of(value)
