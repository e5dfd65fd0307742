"""The rules that bring engines' speech-to-text replies to OpenAI's shapes."""

from __future__ import annotations

import pytest

from parley.domain.transcripts import (
    billed_seconds,
    engine_seconds,
    number,
    subtitles,
    timestamp,
    verbose,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(3, 3.0), (2.5, 2.5), ("2.5", 2.5), ("nan", None), ("x", None), (True, None), (None, None)],
)
def test_numbers_are_numbers(raw: object, expected: float | None) -> None:
    assert number(raw) == expected


def test_vllm_verbose_json_becomes_openais() -> None:
    raw = {
        "duration": "3.25",
        "language": "en",
        "text": "Hi there.",
        "segments": [
            {"id": 0, "start": "0.0", "end": 3.25, "text": " Hi there.", "no_speech_prob": None}
        ],
        "words": None,
    }
    shaped = verbose(raw, "transcribe")
    assert shaped["task"] == "transcribe"
    assert shaped["duration"] == 3.25
    assert shaped["segments"][0]["start"] == 0.0
    assert shaped["segments"][0]["seek"] == 0
    assert shaped["segments"][0]["tokens"] == []
    assert shaped["segments"][0]["no_speech_prob"] is None, (
        "what the engine did not say stays unsaid"
    )
    assert "words" not in shaped


def test_subtitles_are_written_as_openai_writes_them() -> None:
    segments = [
        {"start": 0.0, "end": 3.32, "text": " Hello."},
        {"start": 3.32, "end": 3725.5, "text": " Bye. "},
    ]
    assert subtitles(segments, "srt") == (
        "1\n00:00:00,000 --> 00:00:03,320\nHello.\n\n2\n00:00:03,320 --> 01:02:05,500\nBye.\n\n"
    )
    assert subtitles(segments, "vtt") == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:03.320\nHello.\n\n00:00:03.320 --> 01:02:05.500\nBye.\n\n"
    )
    assert timestamp(-1, ",") == "00:00:00,000"


def test_the_engines_seconds_come_from_usage_or_duration() -> None:
    assert engine_seconds({"usage": {"type": "duration", "seconds": 9}}) == 9.0
    assert engine_seconds({"usage": {"type": "tokens", "input_tokens": 9}}) is None
    assert engine_seconds({"duration": "8.47"}) == 8.47
    assert engine_seconds({"text": "x"}) is None


@pytest.mark.parametrize(
    ("measured", "billed"), [(3.0, 3), (3.0004, 3), (3.0006, 4), (2.5, 3), (0.01, 1), (59.9, 60)]
)
def test_every_started_second_is_billed(measured: float, billed: int) -> None:
    assert billed_seconds(measured) == billed
