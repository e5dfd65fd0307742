"""Deepgram's wire mapping without a server: the reply shapes the fake does not send
(paragraphs, bare words, broken bodies), error bodies, formats, and the live messages."""

from __future__ import annotations

import io

import orjson
import pytest

from parley.domain.transcripts import ResponseFormat
from parley.errors import InvalidRequest, UpstreamError
from parley.providers.base import AudioUpload, Target, TranscriptionRequest
from parley.providers.deepgram.live import deltas
from parley.providers.deepgram.wire import envelope, output, roster, transcript

TARGET = Target("dg", "https://api.deepgram.com/v1", "k" * 40, "nova-3", 1, 1)
WORDS = [
    {"word": "hello", "punctuated_word": "Hello,", "start": 0.1, "end": 0.4},
    {"word": "world", "start": 0.5, "end": 0.9},
]


def asked(fmt: ResponseFormat) -> TranscriptionRequest:
    upload = AudioUpload(io.BytesIO(b""), "audio.wav", "audio/wav")
    return TranscriptionRequest("transcribe", upload, fmt, (), ("word", "segment"))


def reply(alternative: dict[str, object], **results: object) -> dict[str, object]:
    return {
        "metadata": {"duration": 1.25},
        "results": {"channels": [{"alternatives": [alternative]}], **results},
    }


def test_without_utterances_the_paragraphs_sentences_are_the_segments() -> None:
    sentences = [
        {"text": "Hello, world.", "start": 0.1, "end": 0.9},
        {"text": "Again.", "start": 1.0, "end": 1.2},
    ]
    alternative = {
        "transcript": "Hello, world. Again.",
        "words": WORDS,
        "paragraphs": {"paragraphs": [{"sentences": sentences, "start": 0.1, "end": 1.2}]},
    }
    body = transcript(reply(alternative), TARGET, asked("verbose_json")).body
    assert isinstance(body, dict)
    assert [(s["id"], s["start"], s["end"], s["text"]) for s in body["segments"]] == [
        (0, 0.1, 0.9, "Hello, world."),
        (1, 1.0, 1.2, "Again."),
    ]
    assert body["words"] == [
        {"word": "Hello,", "start": 0.1, "end": 0.4},
        {"word": "world", "start": 0.5, "end": 0.9},
    ]
    assert (body["duration"], body["language"]) == (1.25, "en")


def test_without_either_one_segment_spans_the_words() -> None:
    alternative = {"transcript": " Hello, world ", "words": WORDS}
    reply_ = transcript(reply(alternative), TARGET, asked("srt"))
    assert reply_.body == "1\n00:00:00,100 --> 00:00:00,900\nHello, world\n\n"
    assert reply_.engine_seconds == 1.25


def test_only_the_first_channels_utterances_are_segments_and_language_is_detected() -> None:
    utterances = [
        {"channel": 0, "start": 0.0, "end": 1.0, "transcript": "Hallo."},
        {"channel": 1, "start": 0.0, "end": 1.0, "transcript": "Other side."},
    ]
    body = reply({"transcript": "Hallo.", "words": []}, utterances=utterances)
    body["results"]["channels"][0]["detected_language"] = "de"  # type: ignore[index]
    shaped = transcript(body, TARGET, asked("verbose_json")).body
    assert isinstance(shaped, dict)
    assert [s["text"] for s in shaped["segments"]] == ["Hallo."]
    assert shaped["language"] == "de"


@pytest.mark.parametrize("body", [[], {"results": {}}, {"results": {"channels": [{}]}}])
def test_a_reply_without_an_alternative_is_an_upstream_error(body: object) -> None:
    with pytest.raises(UpstreamError, match="cannot read"):
        transcript(body, TARGET, asked("json"))


def test_both_error_bodies_become_openais_envelope() -> None:
    legacy = envelope(
        b'{"err_code": "INVALID_AUTH", "err_msg": "Invalid credentials.", "request_id": "r"}'
    )
    assert orjson.loads(legacy) == {
        "error": {"message": "Invalid credentials.", "code": "INVALID_AUTH"}
    }
    modern = envelope(b'{"category": "INVALID_QUERY", "message": "bad model", "details": "x"}')
    assert orjson.loads(modern) == {"error": {"message": "bad model", "code": "INVALID_QUERY"}}
    assert envelope(b"Bad Gateway") == b"Bad Gateway"


def test_every_openai_format_has_an_aura_output_and_nothing_else_does() -> None:
    assert output("wav", 16000).query == (
        ("encoding", "linear16"),
        ("sample_rate", "16000"),
        ("container", "wav"),
    )
    assert output("pcm", 8000).sample_rate == 8000
    assert output("opus", 24000).query == (("encoding", "opus"), ("container", "ogg"))
    assert output("aac", 24000).sample_rate is None
    with pytest.raises(InvalidRequest) as refused:
        output("mulaw", 8000)
    assert refused.value.param == "response_format"


def test_the_roster_is_the_canonical_names_once_each() -> None:
    listing = {
        "tts": [
            {"name": "thalia", "canonical_name": "aura-2-thalia-en"},
            {"name": "thalia", "canonical_name": "aura-2-thalia-en", "version": "old"},
            {"name": "broken"},
            "junk",
        ]
    }
    assert roster(listing, "dg").builtin == ("aura-2-thalia-en",)
    with pytest.raises(UpstreamError):
        roster({"stt": []}, "dg")


def live(kind: str, text: str, **fields: object) -> str:
    alternatives = [{"transcript": text, "confidence": 0.9, "words": []}]
    return orjson.dumps(
        {"type": kind, "channel": {"alternatives": alternatives}, **fields}
    ).decode()


def test_only_final_results_with_text_become_deltas() -> None:
    said: list[str] = []
    assert deltas(live("Results", "hel", is_final=False), said, TARGET) == []
    assert deltas(live("Results", "  ", is_final=True), said, TARGET) == []
    assert deltas(live("Results", "Hello.", is_final=True), said, TARGET) == [
        {"type": "transcript.text.delta", "delta": "Hello."}
    ]
    assert deltas(live("Results", "Again.", from_finalize=True), said, TARGET) == [
        {"type": "transcript.text.delta", "delta": " Again."}
    ]
    assert deltas(live("Metadata", "ignored"), said, TARGET) == []
    assert said == ["Hello.", "Again."]


@pytest.mark.parametrize(
    "message", ['{"type": "Error", "description": "boom"}', '{"err_code": "X"}', "[1]", "{"]
)
def test_an_error_or_broken_message_is_an_upstream_error(message: str) -> None:
    with pytest.raises(UpstreamError):
        deltas(message, [], TARGET)
