"""What reading a large Responses body in a body process does per item, and what not."""

from __future__ import annotations

import re
import signal

import orjson
import pytest

from parley.api.responses_apart import Sealed, read_apart
from parley.api.responses_request import ResponsesRequest
from parley.dialects.openai_responses import normalized_input


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
