"""Scribe's word items cut into OpenAI's segments (``providers/elevenlabs/scribe.py``):
at a sentence's end, at a pause longer than a second, where the speaker changes."""

from __future__ import annotations

from typing import Any

from parley.providers.elevenlabs.scribe import cut_segments, language_name


def word(text: str, start: float, end: float, speaker: str = "s0", logprob: float = -0.5) -> Any:
    return {
        "text": text,
        "start": start,
        "end": end,
        "type": "word",
        "speaker_id": speaker,
        "logprob": logprob,
    }


def space(at: float) -> Any:
    return {"text": " ", "start": at, "end": at, "type": "spacing"}


def texts(items: list[Any]) -> list[str]:
    return [segment["text"] for segment in cut_segments(items)]


def test_a_sentence_end_a_long_pause_and_a_new_speaker_each_start_a_segment() -> None:
    items = [
        word("Hi.", 0.0, 0.3),
        space(0.3),
        word("So", 0.4, 0.6),
        space(0.6),
        word("then", 2.0, 2.3),  # 1.4 s of silence before it
        space(2.3),
        word("yes", 2.4, 2.6, speaker="s1"),
    ]
    assert texts(items) == ["Hi.", "So", "then", "yes"]


def test_a_segment_spans_its_words_and_averages_their_logprobs() -> None:
    items = [word("one", 0.5, 0.8, logprob=-0.2), space(0.8), word("two", 0.9, 1.4, logprob=-0.4)]
    (segment,) = cut_segments(items)
    assert (segment["start"], segment["end"], segment["text"]) == (0.5, 1.4, "one two")
    assert abs(segment["avg_logprob"] + 0.3) < 1e-9
    assert segment["tokens"] == [] and segment["no_speech_prob"] is None


def test_audio_events_and_leading_spacing_stay_out_of_the_text_edges() -> None:
    items = [
        space(0.0),
        {"text": "(music)", "start": 0.0, "end": 0.5, "type": "audio_event"},
        word("Go", 0.6, 0.8),
    ]
    assert texts(items) == ["Go"]
    assert cut_segments([]) == []


def test_languages_are_named_as_openai_names_them() -> None:
    assert language_name("eng") == "english" and language_name("FRA") == "french"
    assert language_name("xho") == "xho" and language_name(None) == "english"
