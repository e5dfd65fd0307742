"""The Realtime protocol's sans-IO part: client events read and refused, server events'
usage read, and what a cut response delivered, from frames alone."""

from __future__ import annotations

import base64

import orjson
import pytest

from parley.dialects.realtime import (
    BadEvent,
    Delivered,
    base64_bytes,
    bytes_per_second,
    error_event,
    output_limit,
    read_client_event,
    server_event,
    session_model,
    turn_usage,
)
from parley.domain.usage import Usage

GA_USAGE = {
    "total_tokens": 1300,
    "input_tokens": 1000,
    "output_tokens": 300,
    "input_token_details": {
        "text_tokens": 400,
        "audio_tokens": 600,
        "image_tokens": 0,
        "cached_tokens": 150,
        "cached_tokens_details": {"text_tokens": 50, "audio_tokens": 100, "image_tokens": 0},
    },
    "output_token_details": {"text_tokens": 50, "audio_tokens": 250},
}


def test_a_response_done_is_read_part_by_part() -> None:
    usage = turn_usage({"id": "resp_1", "status": "completed", "usage": GA_USAGE})
    assert usage == Usage(
        prompt_tokens=1000,
        completion_tokens=300,
        cached_tokens=150,
        audio_tokens=600,
        cached_audio_tokens=100,
        audio_output_tokens=250,
    )


@pytest.mark.parametrize(
    "usage",
    [
        None,
        {},
        {"input_tokens": -1, "output_tokens": 3},
        {"input_tokens": 1, "output_tokens": "3"},
        {**GA_USAGE, "output_token_details": {"audio_tokens": 1.5}},
    ],
)
def test_a_usage_that_is_no_count_is_none(usage: object) -> None:
    assert turn_usage({"id": "resp_1", "usage": usage}) is None


def test_parts_past_their_totals_are_cut_to_them() -> None:
    usage = turn_usage(
        {
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5,
                "input_token_details": {"audio_tokens": 99, "cached_tokens": 99},
                "output_token_details": {"audio_tokens": 99},
            }
        }
    )
    assert usage is not None
    assert (usage.audio_tokens, usage.cached_tokens, usage.audio_output_tokens) == (10, 10, 5)


@pytest.mark.parametrize(
    ("frame", "code", "param"),
    [
        ("{nope", "invalid_json", None),
        ("[1, 2]", "invalid_event", None),
        ('{"event_id": "e"}', "invalid_event", "type"),
        ('{"type": "session.create"}', "unknown_event", "type"),
        ('{"type": "input_audio_buffer.append", "audio": 5}', "invalid_value", "audio"),
        ('{"type": "session.update", "session": "x"}', "invalid_value", "session"),
        ('{"type": "response.create", "response": []}', "invalid_value", "response"),
        (
            '{"type": "response.create", "response": {"max_output_tokens": 0}}',
            "invalid_value",
            "response.max_output_tokens",
        ),
        ('{"type": "response.cancel", "event_id": 7}', "invalid_event", "event_id"),
    ],
)
def test_a_bad_client_event_is_named(frame: str, code: str, param: str | None) -> None:
    with pytest.raises(BadEvent) as bad:
        read_client_event(frame, 1000)
    assert (bad.value.code, bad.value.param) == (code, param)


def test_an_audio_chunk_is_bounded_without_decoding_it() -> None:
    audio = base64.b64encode(b"\0" * 1001).decode()
    with pytest.raises(BadEvent) as bad:
        read_client_event(orjson.dumps({"type": "input_audio_buffer.append", "audio": audio}), 1000)
    assert bad.value.code == "audio_chunk_too_large"
    fits = base64.b64encode(b"\0" * 999).decode()
    event = read_client_event(
        orjson.dumps({"type": "input_audio_buffer.append", "audio": fits, "event_id": "a"}), 1000
    )
    assert (event.type, event.event_id) == ("input_audio_buffer.append", "a")
    assert base64_bytes(fits) == 999


def test_the_session_keeps_the_model_it_was_opened_for() -> None:
    event = read_client_event('{"type": "session.update", "session": {"model": "other"}}', 10)
    session_model(event, "gpt-realtime")
    assert orjson.loads(event.encoded())["session"]["model"] == "gpt-realtime"
    untouched = read_client_event('{"type": "session.update", "session": {}}', 10)
    session_model(untouched, "gpt-realtime")
    assert "model" not in untouched.body["session"]


def test_a_turn_output_limit_is_its_own_then_the_sessions() -> None:
    own = read_client_event('{"type": "response.create", "response": {"max_output_tokens": 50}}', 1)
    bare = read_client_event('{"type": "response.create"}', 1)
    endless = read_client_event(
        '{"type": "response.create", "response": {"max_output_tokens": "inf"}}', 1
    )
    assert output_limit(own, 200) == 50
    assert output_limit(bare, 200) == 200
    assert output_limit(bare, None) is None
    assert output_limit(endless, None) is None


def test_a_cut_response_is_estimated_from_what_it_delivered() -> None:
    delivered = Delivered()
    second = base64.b64encode(b"\1" * 48_000).decode()
    delivered.add("response.output_audio.delta", {"delta": second})
    delivered.add("response.output_audio_transcript.delta", {"delta": "Hello there"})
    delivered.add("response.output_audio.delta", {"delta": 5})  # not a delta: nothing
    usage = delivered.usage(100, 60, bytes_per_second({"type": "audio/pcm", "rate": 24000}))
    assert usage == Usage(
        prompt_tokens=100,
        completion_tokens=20 + 3,
        estimated=True,
        audio_tokens=60,
        audio_output_tokens=20,
    )
    assert bytes_per_second({"type": "audio/pcmu"}) == 8000


def test_events_are_read_by_type() -> None:
    assert server_event('{"type": "response.done", "response": {}}')[0] == "response.done"
    assert server_event("not json") == ("", {})
    assert server_event('{"type": 3}') == ("", {})
    error = orjson.loads(error_event("Bad.", code="invalid_json", event_id="e1"))
    assert error["type"] == "error"
    assert error["error"] == {
        "type": "invalid_request_error",
        "code": "invalid_json",
        "message": "Bad.",
        "param": None,
        "event_id": "e1",
    }
