"""/v1/audio/transcriptions and /v1/audio/translations (``parley.api.transcriptions``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import ERROR_REPLY, operation, ref

_FORMATS = ["json", "text", "srt", "vtt", "verbose_json"]
_ARRAY = {"type": "array", "items": {"type": "string"}}


def _form(translation: bool) -> JSON:
    properties: JSON = {
        "file": {
            "type": "string",
            "format": "binary",
            "description": "wav, mp3, m4a/mp4, ogg/opus, webm or flac (recognised from the "
            "bytes); at most `server.max_audio_bytes` and `audio.max_seconds`",
        },
        "model": {"type": "string"},
        "prompt": {"type": "string"},
        "response_format": {"type": "string", "enum": _FORMATS, "default": "json"},
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
    }
    if not translation:
        properties |= {
            "language": {"type": "string", "description": "ISO-639-1"},
            "timestamp_granularities[]": {**_ARRAY, "description": "word, segment"},
            "include[]": {**_ARRAY, "description": "logprobs"},
            "stream": {
                "type": "boolean",
                "default": False,
                "description": "ignored by a model that does not stream: the reply is "
                "whole and carries x-parley-stream: ignored",
            },
        }
    return {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "model"],
                    "properties": properties,
                }
            }
        },
    }


def _replies(translation: bool) -> JSON:
    text = {"schema": {"type": "string"}}
    content: JSON = {
        "application/json": {"schema": ref("Transcription")},
        "text/plain": text,
        "text/vtt": text,
    }
    if not translation:
        content["text/event-stream"] = {
            "schema": {"type": "string", "description": "transcript.text.delta / .done events"}
        }
    return {
        "200": {"description": "The text, in the asked format", "content": content},
        "default": ERROR_REPLY,
    }


SCHEMAS: JSON = {
    "Transcription": {
        "type": "object",
        "required": ["text"],
        "description": "json: text (and usage on transcriptions); verbose_json adds task, "
        "language, duration, segments and words.",
        "properties": {
            "text": {"type": "string"},
            "usage": {
                "type": "object",
                "properties": {
                    "type": {"const": "duration"},
                    "seconds": {"type": "integer", "description": "billed seconds"},
                },
            },
            "task": {"type": "string"},
            "language": {"type": "string"},
            "duration": {"type": "number"},
            "segments": {"type": "array", "items": {"type": "object"}},
            "words": {"type": "array", "items": {"type": "object"}},
        },
    },
}

PATHS: JSON = {
    "/v1/audio/transcriptions": {
        "post": operation(
            "createTranscription",
            "Speech to text, whole or streamed; billed per second of audio",
            _replies(translation=False),
            requestBody=_form(translation=False),
        )
    },
    "/v1/audio/translations": {
        "post": operation(
            "createTranslation",
            "Speech to English text; billed per second of audio",
            _replies(translation=True),
            requestBody=_form(translation=True),
        )
    },
}
