"""What a fake speech-to-text engine "hears" in a clip: deterministic text from its length.

The engine measures the upload itself by decoding it with PyAV (independently of
Parley's ``parley.audio``), so the durations in its replies are real. A clip of ``d``
seconds has one segment per started second; segment ``i`` says "This is part i+1." when
transcribed and "In English, part i+1." when translated. Words share their segment's
time evenly.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import av

JSON = dict[str, Any]
Task = Literal["transcribe", "translate"]
LANGUAGE_NAMES = {"en": "english", "de": "german", "tr": "turkish", "fr": "french"}


class Undecodable(Exception):
    """The upload is not audio the engine can decode."""


def measure(data: bytes) -> float:
    """Seconds of audio in ``data``, by decoding every frame (each at its own rate; a
    packet that does not decode is skipped, as FFmpeg's command line does)."""
    try:
        with av.open(io.BytesIO(data), metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise Undecodable("no audio stream")
            stream = container.streams.audio[0]
            samples: dict[int, int] = {}
            for packet in container.demux(stream):
                try:
                    decoded = packet.decode()
                except av.error.InvalidDataError:
                    continue
                for frame in decoded:
                    samples[frame.sample_rate] = samples.get(frame.sample_rate, 0) + frame.samples
    except av.error.FFmpegError as exc:
        raise Undecodable(str(exc)) from None
    if not samples:
        raise Undecodable("no audio frames")
    return float(sum(Fraction(count, rate) for rate, count in samples.items()))


@dataclass(frozen=True, slots=True)
class Script:
    task: Task
    duration: float
    language: str
    """ISO-639-1 code (``en`` when translating or when none was given)."""
    temperature: float

    @property
    def segments(self) -> list[JSON]:
        count = max(1, math.ceil(self.duration - 1e-9))
        said = "This is part {}." if self.task == "transcribe" else "In English, part {}."
        return [
            {
                "id": index,
                "seek": index * 100,
                "start": float(index),
                "end": round(min(index + 1.0, self.duration), 3),
                "text": " " + said.format(index + 1),
                "tokens": [50364 + index, 1000 + index, 50414 + index],
                "temperature": self.temperature,
                "avg_logprob": -0.25,
                "compression_ratio": 1.1,
                "no_speech_prob": 0.01,
            }
            for index in range(count)
        ]

    @property
    def text(self) -> str:
        return "".join(segment["text"] for segment in self.segments).strip()

    @property
    def words(self) -> list[JSON]:
        found: list[JSON] = []
        for segment in self.segments:
            parts = segment["text"].split()
            step = (segment["end"] - segment["start"]) / len(parts)
            for index, word in enumerate(parts):
                start = segment["start"] + index * step
                found.append(
                    {"word": word, "start": round(start, 3), "end": round(start + step, 3)}
                )
        return found

    @property
    def whole_seconds(self) -> int:
        return math.ceil(self.duration - 1e-9)

    @property
    def language_name(self) -> str:
        return LANGUAGE_NAMES.get(self.language, self.language)


def script_for(data: bytes, task: Task, language: str | None, temperature: float) -> Script:
    spoken = "en" if task == "translate" else (language or "en")
    return Script(task, measure(data), spoken, temperature)


def timestamp(seconds: float, separator: str) -> str:
    millis = round(seconds * 1000)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{whole:02d}{separator}{millis:03d}"


def srt(script: Script) -> str:
    return "".join(
        f"{index + 1}\n{timestamp(s['start'], ',')} --> {timestamp(s['end'], ',')}\n"
        f"{s['text'].strip()}\n\n"
        for index, s in enumerate(script.segments)
    )


def vtt(script: Script) -> str:
    cues = "".join(
        f"{timestamp(s['start'], '.')} --> {timestamp(s['end'], '.')}\n{s['text'].strip()}\n\n"
        for s in script.segments
    )
    return "WEBVTT\n\n" + cues
