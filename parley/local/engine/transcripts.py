"""What the engine hears, written in OpenAI's transcription reply formats.

``json`` is ``{"text", "usage": {"type": "duration", "seconds"}}`` (a translation's is
``{"text"}``), ``text`` the text and a line break, ``verbose_json`` adds ``task``,
``language`` (``english``), ``duration`` and ``segments`` (``words`` when asked), and
``srt`` / ``vtt`` have one cue per segment. Segment fields PocketSphinx has no measure
for are what is true of it: ``temperature`` 0 (decoding is deterministic), ``tokens``
empty (it has no token ids), ``no_speech_prob`` null.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

from parley.domain.transcripts import timestamp
from parley.local.engine.sphinx import Segment, Word, segments

FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
CONTENT_TYPES = {
    "json": "application/json",
    "verbose_json": "application/json",
    "text": "text/plain; charset=utf-8",
    "srt": "text/plain; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class Heard:
    """One clip's recognition: its words and its length in seconds."""

    words: list[Word]
    duration: float
    task: str

    @property
    def text(self) -> str:
        return " ".join(word.word for word in self.words)

    def usage(self) -> dict[str, Any]:
        return {"type": "duration", "seconds": math.ceil(round(self.duration, 3))}


def compression_ratio(text: str) -> float:
    """Whisper's measure: the text's length over its zlib-compressed length."""
    raw = text.encode("utf-8")
    return round(len(raw) / len(zlib.compress(raw)), 3) if raw else 0.0


def segment_record(index: int, segment: Segment) -> dict[str, Any]:
    text = segment.text
    return {
        "id": index,
        "seek": 0,
        "start": segment.start,
        "end": segment.end,
        "text": " " + text,
        "tokens": [],
        "temperature": 0.0,
        "avg_logprob": round(segment.avg_logprob, 4),
        "compression_ratio": compression_ratio(text),
        "no_speech_prob": None,
    }


def verbose(heard: Heard, with_words: bool) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "task": heard.task,
        "language": "english",
        "duration": round(heard.duration, 3),
        "text": heard.text,
        "segments": [segment_record(i, s) for i, s in enumerate(segments(heard.words))],
    }
    if with_words:
        reply["words"] = [{"word": w.word, "start": w.start, "end": w.end} for w in heard.words]
    if heard.task == "transcribe":
        reply["usage"] = heard.usage()
    return reply


def subtitles(heard: Heard, fmt: str) -> str:
    separator = "," if fmt == "srt" else "."
    cues = []
    for index, segment in enumerate(segments(heard.words)):
        span = f"{timestamp(segment.start, separator)} --> {timestamp(segment.end, separator)}"
        cue = f"{span}\n{segment.text}\n\n"
        cues.append(f"{index + 1}\n{cue}" if fmt == "srt" else cue)
    return "".join(cues) if fmt == "srt" else "WEBVTT\n\n" + "".join(cues)


def render(heard: Heard, fmt: str, with_words: bool) -> dict[str, Any] | str:
    """The reply body in ``fmt``: a JSON object, or text."""
    if fmt == "json":
        reply: dict[str, Any] = {"text": heard.text}
        if heard.task == "transcribe":
            reply["usage"] = heard.usage()
        return reply
    if fmt == "verbose_json":
        return verbose(heard, with_words)
    if fmt == "text":
        return heard.text + "\n"
    return subtitles(heard, fmt)


def stream_events(heard: Heard) -> list[dict[str, Any]]:
    """OpenAI's transcript events: a delta per segment, then the whole text."""
    events: list[dict[str, Any]] = []
    for index, segment in enumerate(segments(heard.words)):
        delta = segment.text if index == 0 else " " + segment.text
        events.append({"type": "transcript.text.delta", "delta": delta})
    events.append({"type": "transcript.text.done", "text": heard.text})
    return events
