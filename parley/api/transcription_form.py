"""The speech-to-text form (OpenAI's, for transcriptions and translations), checked.

Arrays come as the SDK sends them (``timestamp_granularities[]=word``) or without the
brackets; booleans as ``true``/``false``. A translation takes the same form: its
``language`` is not needed (the output is English) and is not passed on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from multidict import MultiDict

from parley.api.uploads import Form
from parley.audio import AudioInfo
from parley.audio.pool import ProbePool
from parley.domain.transcripts import FORMATS, ResponseFormat, Task
from parley.errors import InvalidRequest
from parley.providers.base import AudioUpload, TranscriptionRequest

GRANULARITIES = frozenset({"word", "segment"})
INCLUDES = frozenset({"logprobs"})
PASSED_ON = (
    "language",
    "prompt",
    "temperature",
    "chunking_strategy",
    "languages",
    "keywords",
    "known_speaker_names",
    "known_speaker_references",
)
"""Fields passed on as sent, brackets and all (``chunking_strategy[type]``...)."""


@dataclass(frozen=True, slots=True)
class SpeechToText:
    """A checked speech-to-text call: the engine request and Parley's measure of the clip."""

    model: str
    stream: bool
    request: TranscriptionRequest
    audio: AudioInfo

    @property
    def task(self) -> Task:
        return self.request.task

    @property
    def response_format(self) -> ResponseFormat:
        return self.request.response_format


async def speech_to_text(form: Form, task: Task, probes: ProbePool, group: int) -> SpeechToText:
    """Check the fields, then sniff and measure the file (on ``probes``' threads, in
    ``group``'s turn): every 400 here comes before any engine is called."""
    fields = form.fields
    model = _required(fields, "model")
    fmt = _response_format(fields)
    stream = _boolean(fields, "stream")
    if stream and task == "translate":
        raise InvalidRequest("Translations cannot be streamed; send stream=false.", param="stream")
    granularities = _choices(fields, "timestamp_granularities", GRANULARITIES)
    if granularities and fmt != "verbose_json":
        raise InvalidRequest(
            "'timestamp_granularities' needs response_format verbose_json.",
            param="timestamp_granularities",
        )
    include = _choices(fields, "include", INCLUDES)
    _temperature(fields)
    if form.file is None:
        raise InvalidRequest("Missing required parameter: 'file'.", param="file")
    audio = await probes.measure(group, form.file)
    upload = AudioUpload(
        form.file, f"audio.{audio.container.extension}", audio.container.media_type
    )
    request = TranscriptionRequest(
        task, upload, fmt, _options(fields, task), granularities, include
    )
    return SpeechToText(model, stream, request, audio)


def _required(fields: MultiDict[str], name: str) -> str:
    value = fields.get(name, "").strip()
    if not value:
        raise InvalidRequest(f"Missing required parameter: '{name}'.", param=name)
    return value


def _response_format(fields: MultiDict[str]) -> ResponseFormat:
    value = fields.get("response_format", "json") or "json"
    for known in FORMATS:
        if value == known:
            return known
    raise InvalidRequest(
        f"'response_format' must be one of {', '.join(FORMATS)}; got '{value}'.",
        param="response_format",
    )


def _boolean(fields: MultiDict[str], name: str) -> bool:
    value = fields.get(name, "false").strip().lower()
    if value not in ("true", "false", "1", "0", ""):
        raise InvalidRequest(f"'{name}' must be true or false; got '{value}'.", param=name)
    return value in ("true", "1")


def _choices(fields: MultiDict[str], name: str, allowed: frozenset[str]) -> tuple[str, ...]:
    values = [*fields.getall(f"{name}[]", []), *fields.getall(name, [])]
    for value in values:
        if value not in allowed:
            raise InvalidRequest(
                f"'{name}' values must be among {', '.join(sorted(allowed))}; got '{value}'.",
                param=name,
            )
    return tuple(dict.fromkeys(values))


def _temperature(fields: MultiDict[str]) -> None:
    raw = fields.get("temperature")
    if raw is None or raw == "":
        return
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise InvalidRequest(
            f"'temperature' must be a number between 0 and 1; got '{raw}'.", param="temperature"
        )


def _options(fields: MultiDict[str], task: Task) -> tuple[tuple[str, str], ...]:
    """The other fields to pass on, as sent (``chunking_strategy[type]`` too)."""
    passed: list[tuple[str, str]] = []
    for name, value in fields.items():
        base = name.split("[", 1)[0]
        if base not in PASSED_ON or value == "" or (base == "language" and task == "translate"):
            continue
        passed.append((name, value))
    return tuple(passed)
