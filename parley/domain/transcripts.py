"""OpenAI's speech-to-text reply shapes, and the rules that bring engines' replies to them.

Engines disagree in small ways (``audio-engines.md``): vLLM sends ``duration`` as a
string and ``no_speech_prob`` as null, speaches leaves out ``task``, vLLM cannot write
subtitles. These pure functions give every caller OpenAI's shapes: numbers are numbers,
``task`` is set, and SRT and WebVTT are written from the segments when an engine cannot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from parley.domain.wire import JSON

Task = Literal["transcribe", "translate"]
ResponseFormat = Literal["json", "text", "srt", "vtt", "verbose_json"]
FORMATS: tuple[ResponseFormat, ...] = ("json", "text", "srt", "vtt", "verbose_json")
SUBTITLES: frozenset[str] = frozenset({"srt", "vtt"})


@dataclass(frozen=True, slots=True)
class TranscriptionAbilities:
    """What a ``kind: transcription`` model can do, as its configuration declares."""

    translate: bool = False
    stream: bool = False
    formats: tuple[ResponseFormat, ...] = FORMATS

    def describe(self) -> dict[str, Any]:
        return {"translate": self.translate, "stream": self.stream, "formats": list(self.formats)}


_SEGMENT_FLOATS = ("start", "end", "temperature", "avg_logprob", "compression_ratio")


def number(value: Any) -> float | None:
    """A JSON number, or a numeric string (vLLM's ``duration``), as a float; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            parsed = float(value)
        except ValueError:
            return None
        return parsed if math.isfinite(parsed) else None
    return None


def _integer(value: Any, default: int) -> int:
    found = number(value)
    return int(found) if found is not None else default


def segment(raw: JSON, index: int) -> JSON:
    """One segment with OpenAI's keys; numbers the engine did not give stay null."""
    shaped: JSON = {
        "id": _integer(raw.get("id"), index),
        "seek": _integer(raw.get("seek"), 0),
    }
    for key in ("start", "end"):
        shaped[key] = number(raw.get(key)) or 0.0
    shaped["text"] = str(raw.get("text") or "")
    tokens = raw.get("tokens")
    shaped["tokens"] = [t for t in tokens if isinstance(t, int)] if isinstance(tokens, list) else []
    for key in (*_SEGMENT_FLOATS[2:], "no_speech_prob"):
        shaped[key] = number(raw.get(key))
    return shaped


def word(raw: JSON) -> JSON:
    return {
        "word": str(raw.get("word") or ""),
        "start": number(raw.get("start")) or 0.0,
        "end": number(raw.get("end")) or 0.0,
    }


def verbose(body: JSON, task: Task) -> JSON:
    """OpenAI's ``verbose_json``: ``task``, ``language``, ``duration`` (a number; null when
    the engine gave none, for the caller to fill), ``text``, and ``segments`` / ``words``
    when given."""
    language = body.get("language")
    shaped: JSON = {
        "task": task,
        "language": language if isinstance(language, str) and language else "english",
        "duration": number(body.get("duration")),
        "text": str(body.get("text") or ""),
    }
    segments = body.get("segments")
    if isinstance(segments, list):
        shaped["segments"] = [
            segment(item, index) for index, item in enumerate(segments) if isinstance(item, dict)
        ]
    words = body.get("words")
    if isinstance(words, list):
        shaped["words"] = [word(item) for item in words if isinstance(item, dict)]
    return shaped


def engine_seconds(body: JSON) -> float | None:
    """The audio length an engine reported: ``usage.seconds`` or the verbose ``duration``."""
    usage = body.get("usage")
    if isinstance(usage, dict) and usage.get("type") == "duration":
        seconds = number(usage.get("seconds"))
        if seconds is not None:
            return seconds
    return number(body.get("duration"))


def timestamp(seconds: float, separator: str) -> str:
    """``HH:MM:SS,mmm`` (SRT) or ``HH:MM:SS.mmm`` (WebVTT)."""
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{whole:02d}{separator}{millis:03d}"


def subtitles(segments: list[JSON], fmt: str) -> str:
    """SRT or WebVTT cues, one per segment (as OpenAI writes them)."""
    separator = "," if fmt == "srt" else "."
    cues = []
    for index, item in enumerate(segments):
        span = f"{timestamp(item['start'], separator)} --> {timestamp(item['end'], separator)}"
        text = str(item["text"]).strip()
        cues.append(f"{index + 1}\n{span}\n{text}\n\n" if fmt == "srt" else f"{span}\n{text}\n\n")
    body = "".join(cues)
    return body if fmt == "srt" else "WEBVTT\n\n" + body


MIN_BILLED_SECONDS = 1
"""What the shortest clip is billed: any audio at all is a started second."""


def billed_seconds(measured: float) -> int:
    """Whole seconds billed for a clip: every started second (a 2.5 s clip is 3),
    measured to the millisecond first, so 3.0004 s is 3; never less than
    ``MIN_BILLED_SECONDS`` (a clip of one sample is billed a second, not nothing)."""
    return max(MIN_BILLED_SECONDS, math.ceil(round(measured, 3)))
