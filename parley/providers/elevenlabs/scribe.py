"""ElevenLabs Scribe (``POST /v1/speech-to-text``) in OpenAI's transcription shapes.

The form sent: ``model_id`` (the channel's upstream model, ``scribe_v1`` or
``scribe_v2``), the ``file``, ``timestamps_granularity=word`` (every reply format is
written from the words), ``tag_audio_events=false`` (OpenAI's transcripts carry no
``(laughter)``), and the caller's ``language`` as ``language_code`` and ``temperature``
when given. OpenAI's other fields (``prompt``, ``include``...) have no Scribe meaning and
are not sent.

Scribe answers ``{language_code, text, words: [{text, start, end, type, logprob,
speaker_id}], audio_duration_secs}``, where ``type`` is ``word``, ``spacing`` or
``audio_event``. OpenAI's ``words`` are the ``word`` items; its ``segments`` are cut
from the words at the end of a sentence, at a pause longer than ``PAUSE_SECONDS`` or
where the speaker changes, each with the mean of its words' ``logprob`` as
``avg_logprob``; SRT and WebVTT are written from those segments. ``language`` is named in
English as OpenAI names it (``eng`` → ``english``). ``audio_duration_secs`` is recorded,
never billed. Scribe does not translate: a translation is refused (400,
``translation_not_supported``) before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from parley.domain.transcripts import number, subtitles, verbose
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, UpstreamError
from parley.providers.base import Transcript, TranscriptionRequest

DELTA = "transcript.text.delta"
DONE = "transcript.text.done"
PAUSE_SECONDS = 1.0
SENTENCE_ENDS = (".", "?", "!", "\u3002", "\uff1f", "\uff01")
PASSED_OPTIONS = {"language": "language_code", "temperature": "temperature"}
LANGUAGE_NAMES = {
    "ara": "arabic",
    "ces": "czech",
    "cmn": "chinese",
    "dan": "danish",
    "deu": "german",
    "ell": "greek",
    "eng": "english",
    "fin": "finnish",
    "fra": "french",
    "heb": "hebrew",
    "hin": "hindi",
    "hun": "hungarian",
    "ind": "indonesian",
    "ita": "italian",
    "jpn": "japanese",
    "kor": "korean",
    "nld": "dutch",
    "nor": "norwegian",
    "pol": "polish",
    "por": "portuguese",
    "ron": "romanian",
    "rus": "russian",
    "spa": "spanish",
    "swe": "swedish",
    "tha": "thai",
    "tur": "turkish",
    "ukr": "ukrainian",
    "vie": "vietnamese",
    "zho": "chinese",
}
"""Scribe's ISO 639-3 codes in OpenAI's spelling; another code is given as it came."""


def no_translation() -> InvalidRequest:
    return InvalidRequest(
        "This model's engine (ElevenLabs Scribe) transcribes but does not translate speech "
        "to English; use a model that lists translate among its abilities (GET /v1/models).",
        param="model",
        code="translation_not_supported",
    )


def form_fields(model: str, request: TranscriptionRequest) -> list[tuple[str, str]]:
    fields = [
        ("model_id", model),
        ("timestamps_granularity", "word"),
        ("tag_audio_events", "false"),
    ]
    fields += [(PASSED_OPTIONS[k], v) for k, v in request.options if k in PASSED_OPTIONS]
    return fields


def transcript(answer: Any, request: TranscriptionRequest, channel: str) -> Transcript:
    """Scribe's answer in the caller's format."""
    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
        raise UpstreamError(
            f"The upstream channel `{channel}` sent a transcript Parley cannot read."
        )
    text = answer["text"].strip()
    seconds = number(answer.get("audio_duration_secs"))
    fmt = request.response_format
    if fmt == "json":
        return Transcript({"text": text}, seconds)
    if fmt == "text":
        return Transcript(text + "\n", seconds)
    items = [item for item in answer.get("words") or () if isinstance(item, dict)]
    segments = list(cut_segments(items))
    if fmt in ("srt", "vtt"):
        return Transcript(subtitles(segments, fmt), seconds)
    body: JSON = {
        "language": language_name(answer.get("language_code")),
        "duration": None,  # Parley's own measure is given
        "text": text,
        "segments": segments,
    }
    if "word" in request.timestamp_granularities:
        body["words"] = [
            {"word": item["text"], "start": item.get("start"), "end": item.get("end")}
            for item in items
            if item.get("type", "word") == "word" and isinstance(item.get("text"), str)
        ]
    return Transcript(verbose(body, request.task), seconds)


def language_name(code: Any) -> str:
    if not isinstance(code, str) or not code:
        return "english"
    return LANGUAGE_NAMES.get(code.lower(), code.lower())


def cut_segments(items: Iterable[JSON]) -> list[JSON]:
    """OpenAI-style segments from Scribe's word, spacing and event items."""
    segments: list[JSON] = []
    text: list[str] = []
    words: list[JSON] = []
    for item in items:
        piece = item.get("text")
        piece = piece if isinstance(piece, str) else ""
        if item.get("type", "word") != "word":
            if words:
                text.append(piece)
            continue
        if words and _breaks(words[-1], item):
            segments.append(_segment(len(segments), text, words))
            text, words = [], []
        text.append(piece)
        words.append(item)
    if words:
        segments.append(_segment(len(segments), text, words))
    return segments


def _breaks(last: JSON, word: JSON) -> bool:
    """Whether a new segment starts at ``word``, after the word ``last``."""
    said = str(last.get("text") or "").rstrip()
    if said.endswith(SENTENCE_ENDS):
        return True
    if last.get("speaker_id") != word.get("speaker_id"):
        return True
    ended, starts = number(last.get("end")), number(word.get("start"))
    return ended is not None and starts is not None and starts - ended > PAUSE_SECONDS


def _segment(index: int, text: list[str], words: list[JSON]) -> JSON:
    logprobs = [p for p in (number(w.get("logprob")) for w in words) if p is not None]
    return {
        "id": index,
        "seek": 0,
        "start": number(words[0].get("start")) or 0.0,
        "end": number(words[-1].get("end")) or 0.0,
        "text": "".join(text).strip(),
        "tokens": [],
        "temperature": None,
        "avg_logprob": sum(logprobs) / len(logprobs) if logprobs else None,
        "compression_ratio": None,
        "no_speech_prob": None,
    }
