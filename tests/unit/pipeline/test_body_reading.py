"""What reading a large Responses body in a body process does per item, and what not."""

from __future__ import annotations

import re
import signal
from typing import Any

import orjson
import pytest

from parley.api import responses_apart
from parley.api.refusal import Refusal
from parley.api.responses_apart import Sealed, read_apart
from parley.api.responses_request import ResponsesRequest
from parley.dialects import openai_responses
from parley.dialects.openai_responses import normalized_input
from parley.dialects.straight import straight


def test_reading_a_body_never_writes_out_the_whole_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A repr of the request would spell out every item: seconds for a large body. (A
    body process's SIGINT handler is Python's own, as a fresh interpreter's is.)"""

    written: list[ResponsesRequest] = []

    def spelled_out(self: ResponsesRequest) -> str:
        written.append(self)
        return "ResponsesRequest(...)"

    monkeypatch.setattr(ResponsesRequest, "__repr__", spelled_out)
    body = {"model": "m", "input": [{"role": "user", "content": "hi"}] * 3, "store": False}
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        read = read_apart(orjson.dumps(body), 1)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert written == []
    assert isinstance(read, Sealed)
    assert len(orjson.loads(read.messages or b"")) == 1


def test_one_requests_item_ids_differ_and_keep_openais_form() -> None:
    items = normalized_input(
        [{"role": "user", "content": "a"}] * 3 + [{"type": "function_call_output"}]
    )
    ids = [item["id"] for item in items]
    assert len(set(ids)) == 4
    assert all(re.fullmatch(r"msg_[0-9a-f]{48}", each) for each in ids[:3])
    assert re.fullmatch(r"fco_[0-9a-f]{48}", ids[3])
    assert normalized_input("a")[0]["id"][4:36] != ids[0][4:36]  # each request draws anew


MIXED: list[dict[str, object]] = [
    {"role": "user", "content": "a"},
    {"role": "user", "content": ""},
    {"role": "assistant", "content": "b"},
    {"role": "system", "content": "be brief"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "c"}]},
    {"type": "function_call", "name": "f", "call_id": "c1", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    {"role": "user", "content": "d", "status": "completed"},
]


def test_an_unstored_responses_input_is_read_without_ids_or_copies() -> None:
    """Only a stored response's items are seen again: unstored, a plain user message is
    read as it came and no item is given an id, and the call is the same."""
    kept = normalized_input(MIXED)
    unkept = normalized_input(MIXED, kept=False)
    assert all("id" in item for item in kept)
    assert not any("id" in item for item in unkept)
    assert unkept[0] is MIXED[0] and unkept[1] is MIXED[1] and unkept[7] is MIXED[7]
    body = {"model": "m", "input": MIXED}
    read = openai_responses.decode_request(body, kept)
    assert openai_responses.decode_request(body, unkept) == read
    assert len(read.instructions) == 1 and read.messages[0].role == "user"


def test_an_unstored_body_is_read_whole_and_estimated_as_a_stored_one() -> None:
    stored = {"model": "m", "input": MIXED * 3, "store": True}
    unstored = {**stored, "store": False}
    kept, unkept = read_apart(orjson.dumps(stored), 1), read_apart(orjson.dumps(unstored), 1)
    assert isinstance(kept, Sealed) and isinstance(unkept, Sealed)
    assert unkept.messages == kept.messages
    assert unkept.parsed.text.prompt_estimate == kept.parsed.text.prompt_estimate
    assert unkept.items == b"[]" and len(orjson.loads(kept.items)) == len(MIXED) * 3


@pytest.mark.parametrize(
    "reference",
    [
        b'{"type": "item_reference", "id": "msg_1"}',
        b'{"type": "\\u0069tem_reference", "id": "msg_1"}',
        b'{"type": "item\\u005freference", "id": "msg_1"}',
    ],
)
def test_a_body_that_refers_to_a_stored_item_is_left_to_the_serving_process(
    reference: bytes,
) -> None:
    """However its names are spelled, a body that continues a stored response is read
    where the store is (``read_apart`` answers ``None``)."""
    raw = b'{"model": "m", "store": false, "input": [{"role": "user", "content": "hi"}, '
    assert read_apart(raw + reference + b"]}", 1) is None
    assert read_apart(b'{"model": "m", "previous_response_id": "resp_1", "input": "x"}', 1) is None


@pytest.mark.parametrize("block", [False, True])
@pytest.mark.parametrize("store", [False, True])
def test_a_run_of_plain_texts_is_read_straight_as_the_long_way_reads_it(
    store: bool, block: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts each a message's string content, or (``block``) the one ``input_text``
    block its content lists."""
    written: list[object] = []

    def seen(*args: Any) -> Any:
        written.append(straight(*args))
        return written[-1]

    monkeypatch.setattr(responses_apart, "straight", seen)
    texts = ["a", 'b "quoted", "and"', "ç" * 33, " ", "line\nbreak"] * 5
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": text}] if block else text}
            for text in texts
        ],
        "instructions": "be brief",
        "tools": tools,
        "stream": True,
        "store": store,
    }
    raw = orjson.dumps(body)
    read = read_apart(raw, 1)
    assert isinstance(read, Sealed)
    assert len(written) == 1 and written[0] is not None  # written straight, not the long way
    long_way = responses_apart._without_waiting(
        responses_apart.parse_responses(body, len(raw), 1, responses_apart.NO_BOOK)
    )
    assert long_way.chat is not None
    assert orjson.loads(read.messages or b"") == long_way.chat["messages"]
    assert {**read.parsed.chat, "messages": None} == {**long_way.chat, "messages": None}
    text = long_way.text
    assert (read.parsed.text.prompt_estimate, read.parsed.text.prompt_ceiling) == (
        text.prompt_estimate,
        text.prompt_ceiling,
    )
    assert orjson.loads(read.input) == body["input"]
    stored = orjson.loads(read.items)
    assert [{**item, "id": None} for item in stored] == (
        [{**item, "id": None} for item in long_way.items] if store else []
    )


def test_a_run_of_other_blocks_is_read_the_long_way_and_a_bad_one_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only ``input_text`` blocks, one a message, are texts to write straight: other
    blocks are read whole, as the long way reads them; a bad body is refused, naming
    its field, either way."""
    written: list[object] = []
    monkeypatch.setattr(responses_apart, "straight", lambda *args: written.append(args))
    for content in (
        [{"type": "text", "text": "a"}],
        [{"type": "input_text", "text": "a"}] * 2,
        [{"type": "input_text", "text": "a", "x": 1}],
    ):
        body = {"model": "m", "input": [{"role": "user", "content": content}] * 3, "store": False}
        raw = orjson.dumps(body)
        read = read_apart(raw, 1)
        assert isinstance(read, Sealed) and written == []
        long_way = responses_apart._without_waiting(
            responses_apart.parse_responses(body, len(raw), 1, responses_apart.NO_BOOK)
        )
        messages = None if long_way.chat is None else long_way.chat["messages"]
        assert orjson.loads(read.messages or b"null") == messages
        assert read.parsed.text.prompt_estimate == long_way.text.prompt_estimate
    blocks = [{"role": "user", "content": [{"type": "input_text", "text": "a"}]}] * 3
    for bad, field in (({"temperature": 3}, "temperature"), ({"model": 1}, "model")):
        refused = read_apart(orjson.dumps({"model": "m", "input": blocks, **bad}), 1)
        assert isinstance(refused, Refusal) and refused.param == field
