"""Finish reasons read from what a caller was sent, in each dialect (for traces)."""

from __future__ import annotations

import orjson

from parley.dialects.finish import MOST, OVERLAP, finish_reasons


def test_a_chat_reply_gives_each_choices_reason() -> None:
    body = orjson.dumps(
        {
            "choices": [
                {"index": 0, "finish_reason": "stop"},
                {"index": 1, "finish_reason": "length"},
            ]
        }
    )
    assert finish_reasons(body) == ("stop", "length")


def test_chunks_before_the_last_say_null_which_is_no_reason() -> None:
    chunks = b'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
    assert finish_reasons(chunks) == ()
    last = b'data: {"choices":[{"delta":{},"finish_reason": "tool_calls"}]}\n\ndata: [DONE]\n\n'
    assert finish_reasons(last, ("x",)) == ("x", "tool_calls")


def test_messages_give_their_stop_reason() -> None:
    start = b'event: message_start\ndata: {"message":{"stop_reason":null}}\n\n'
    delta = b'event: message_delta\ndata: {"delta":{"stop_reason":"max_tokens"}}\n\n'
    assert finish_reasons(start + delta) == ("max_tokens",)


def test_responses_give_their_end_state_or_why_they_are_incomplete() -> None:
    done = b'event: response.completed\ndata: {"type":"response.completed","response":{}}\n\n'
    assert finish_reasons(done) == ("completed",)
    whole = orjson.dumps(
        {"object": "response", "status": "incomplete",
         "incomplete_details": {"reason": "max_output_tokens"}}
    )  # fmt: skip
    assert finish_reasons(whole) == ("max_output_tokens",)


def test_a_reason_cut_between_two_reads_is_found_once() -> None:
    event = b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'
    for cut in range(1, len(event)):
        first, second = event[:cut], event[cut:]
        found = finish_reasons(first)
        before = first[-OVERLAP:]
        found = finish_reasons(before + second, found, after=len(before))
        assert found == ("stop",), cut


def test_at_most_a_bounded_number_are_kept() -> None:
    body = b'{"finish_reason":"stop"}' * (MOST + 5)
    assert len(finish_reasons(body)) == MOST
