"""Deepgram's wire format in OpenAI's terms: what Parley asks for and how the answers are
read (pure functions, no I/O).

Listen (speech to text, ``POST /v1/listen`` and the live WebSocket): the query names the
channel's upstream model, ``punctuate`` and ``smart_format`` (the channel's settings),
``language`` (the caller's, else the channel's) and a ``keyterm`` per OpenAI
``keywords[]`` entry. A file asked for segments (``verbose_json``, ``srt``, ``vtt``) is
sent with ``utterances=true``. The reply's first channel and first alternative become
OpenAI's shapes: ``text`` is the transcript; segments are the utterances (else the
paragraphs' sentences, else one segment over the words); words carry their punctuated
spelling. Deepgram's ``metadata.duration`` is kept as the engine's figure, never billed.

Speak (Aura, ``POST /v1/speak``): the voice is Aura's model name (``aura-2-thalia-en``:
Deepgram's voices are models); the caller's ``response_format`` becomes ``encoding``,
``container`` and ``sample_rate`` (``OUTPUTS``); ``speed`` is sent when it is not 1,
clamped to Aura's 0.7 to 1.5.

Errors: Deepgram answers ``{"err_code", "err_msg", "request_id"}`` (or
``{"category", "message", "details", "request_id"}``); both become OpenAI's envelope for
``openai.refusal``. A 402 (the project's balance is spent) is the channel's fault, judged
as a 403: the next channel is tried and the breaker hears it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from parley.catalog_settings import DeepgramOptions
from parley.domain.transcripts import number, segment, subtitles
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, UpstreamError, UpstreamRefused
from parley.providers.base import (
    EngineRoster,
    SpeechRequest,
    Target,
    Transcript,
    TranscriptionRequest,
)
from parley.providers.openai.refusal import refusal

LISTEN_PATH = "/listen"
SPEAK_PATH = "/speak"
MODELS_PATH = "/models"
SEGMENTED = frozenset({"verbose_json", "srt", "vtt"})
"""The formats that need segments, for which a file is sent with ``utterances=true``."""
SLOWEST, FASTEST = 0.7, 1.5
DEFAULT_LANGUAGE = "en"
"""What Deepgram transcribes when no ``language`` is sent, and so what ``verbose_json``
says then."""
Query = list[tuple[str, str]]


def options_of(target: Target) -> DeepgramOptions:
    """The channel's Deepgram settings (the defaults for a target built without them)."""
    options = target.options
    return options if isinstance(options, DeepgramOptions) else DeepgramOptions()


def _flag(value: bool) -> str:
    return "true" if value else "false"


def language_of(target: Target, request: TranscriptionRequest) -> str | None:
    """The language to ask for: the caller's ``language``, else the channel's."""
    for name, value in request.options:
        if name == "language" and value:
            return value
    return options_of(target).language


def listen_query(target: Target, request: TranscriptionRequest, *, live: bool) -> Query:
    """The query of a ``listen`` call, file (``live=False``) or WebSocket."""
    options = options_of(target)
    query: Query = [
        ("model", target.model),
        ("punctuate", _flag(options.punctuate)),
        ("smart_format", _flag(options.smart_format)),
    ]
    language = language_of(target, request)
    if language is not None:
        query.append(("language", language))
    query += [
        ("keyterm", value)
        for name, value in request.options
        if name.split("[", 1)[0] == "keywords" and value
    ]
    if live:
        query.append(("interim_results", "false"))  # deltas are final text, never revised
    elif request.response_format in SEGMENTED:
        query.append(("utterances", "true"))
    return query


def transcript(body: object, target: Target, request: TranscriptionRequest) -> Transcript:
    """A ``listen`` reply in OpenAI's shape for the caller's format."""
    if not isinstance(body, dict):
        raise _unreadable(target.channel)
    first, alternative = _first_alternative(body, target.channel)
    metadata = body.get("metadata")
    seconds = number(metadata.get("duration")) if isinstance(metadata, dict) else None
    text = str(alternative.get("transcript") or "").strip()
    fmt = request.response_format
    if fmt == "json":
        return Transcript({"text": text}, seconds)
    if fmt == "text":
        return Transcript(text + "\n", seconds)
    words = [_word(item) for item in _dicts(alternative.get("words"))]
    segments = _segments(body.get("results"), alternative, words, text, seconds)
    if fmt in ("srt", "vtt"):
        return Transcript(subtitles(segments, fmt), seconds)
    detected = first.get("detected_language")
    language = detected if isinstance(detected, str) and detected else None
    shaped: JSON = {
        "task": "transcribe",
        "language": language or language_of(target, request) or DEFAULT_LANGUAGE,
        "duration": seconds,
        "text": text,
    }
    granularities = request.timestamp_granularities or ("segment",)
    if "segment" in granularities:
        shaped["segments"] = segments
    if "word" in granularities:
        shaped["words"] = words
    return Transcript(shaped, seconds)


def _unreadable(channel: str) -> UpstreamError:
    return UpstreamError(f"The upstream channel `{channel}` sent a transcript Parley cannot read.")


def _first_alternative(body: JSON, channel: str) -> tuple[JSON, JSON]:
    """The reply's first channel and that channel's first alternative."""
    results = body.get("results")
    channels = results.get("channels") if isinstance(results, dict) else None
    first = channels[0] if isinstance(channels, list) and channels else None
    alternatives = first.get("alternatives") if isinstance(first, dict) else None
    alternative = alternatives[0] if isinstance(alternatives, list) and alternatives else None
    if not isinstance(first, dict) or not isinstance(alternative, dict):
        raise _unreadable(channel)
    return first, alternative


def _dicts(value: object) -> list[JSON]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _word(raw: JSON) -> JSON:
    spelled = raw.get("punctuated_word") or raw.get("word")
    return {
        "word": str(spelled or ""),
        "start": number(raw.get("start")) or 0.0,
        "end": number(raw.get("end")) or 0.0,
    }


def _segments(
    results: object, alternative: JSON, words: list[JSON], text: str, seconds: float | None
) -> list[JSON]:
    """OpenAI's segments from the utterances of the first channel, else from the
    paragraphs' sentences, else one over the words (or the whole clip)."""
    spans: list[JSON] = []
    utterances = results.get("utterances") if isinstance(results, dict) else None
    for item in _dicts(utterances):
        if item.get("channel", 0) == 0:
            spans.append(
                {"start": item.get("start"), "end": item.get("end"), "text": item.get("transcript")}
            )
    if not spans:
        paragraphs = alternative.get("paragraphs")
        listed = paragraphs.get("paragraphs") if isinstance(paragraphs, dict) else None
        for paragraph in _dicts(listed):
            spans += _dicts(paragraph.get("sentences"))
    if not spans and text:
        start = words[0]["start"] if words else 0.0
        end = words[-1]["end"] if words else (seconds or 0.0)
        spans.append({"start": start, "end": end, "text": text})
    return [
        segment({**span, "text": str(span.get("text") or "").strip()}, index)
        for index, span in enumerate(spans)
    ]


@dataclass(frozen=True, slots=True)
class Output:
    """How Aura is asked for one of OpenAI's formats, and what comes back."""

    query: tuple[tuple[str, str], ...]
    format: str
    sample_rate: int | None


def output(response_format: str, rate: int) -> Output:
    """Aura's ``encoding``, ``container`` and ``sample_rate`` for an OpenAI format:
    ``wav`` and ``pcm`` are 16-bit PCM (``linear16``) at the channel's rate, in a WAV
    container or none; ``opus`` is Ogg Opus; mp3, flac and aac are Aura's own
    (mp3 and aac at their fixed rates, which Deepgram does not let a request change)."""
    pcm = (("encoding", "linear16"), ("sample_rate", str(rate)))
    if response_format == "wav":
        return Output((*pcm, ("container", "wav")), "wav", rate)
    if response_format == "pcm":
        return Output((*pcm, ("container", "none")), "pcm", rate)
    if response_format == "opus":
        return Output((("encoding", "opus"), ("container", "ogg")), "opus", None)
    if response_format in ("mp3", "flac", "aac"):
        return Output((("encoding", response_format),), response_format, None)
    raise InvalidRequest(
        f"'response_format' `{response_format}` cannot be made by Deepgram's Aura.",
        param="response_format",
        code="unsupported_response_format",
    )


def speak_query(target: Target, request: SpeechRequest) -> tuple[Query, Output]:
    """The query of a ``speak`` call: the voice (an Aura model; the channel's upstream
    model when none is named), the format, and the speed when it is not 1."""
    made = output(request.response_format, options_of(target).sample_rate)
    query: Query = [("model", request.voice or target.model), *made.query]
    if request.speed != 1.0:
        query.append(("speed", f"{min(FASTEST, max(SLOWEST, request.speed)):g}"))
    return query, made


def roster(listing: object, channel: str) -> EngineRoster:
    """Aura's voices from ``GET /v1/models``: each text-to-speech model's canonical name
    (``aura-2-thalia-en``), the name ``speak`` takes."""
    models = listing.get("tts") if isinstance(listing, dict) else None
    if not isinstance(models, list):
        raise UpstreamError(
            f"The upstream channel `{channel}` sent a voice list Parley cannot read."
        )
    names = (item.get("canonical_name") for item in _dicts(models))
    return EngineRoster(builtin=tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n)))


def deepgram_refusal(
    channel: str,
    status: int,
    raw: bytes,
    secret: str | None,
    headers: Mapping[bytes, bytes] | None = None,
) -> UpstreamRefused:
    """The error for a Deepgram error answer (see the module's doc)."""
    judged = 403 if status == 402 else status
    return refusal(channel, judged, envelope(raw), secret, headers)


def envelope(raw: bytes) -> bytes:
    """OpenAI's envelope for Deepgram's error body; other bodies as they are."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    if not isinstance(body, dict) or "error" in body:
        return raw
    message = _first_text(body, ("err_msg", "message", "reason"))
    if message is None:
        return raw
    details: dict[str, Any] = {"message": message}
    code = _first_text(body, ("err_code", "category"))
    if code is not None:
        details["code"] = code
    return orjson.dumps({"error": details})


def _first_text(body: JSON, names: Sequence[str]) -> str | None:
    for name in names:
        value = body.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None
