"""/v1/audio/speech and /v1/audio/voices (``parley.api.speech``, ``voices``, ``voice_clones``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import (
    ERROR_REPLY,
    json_body,
    json_reply,
    operation,
    path_param,
    query_param,
    ref,
)

_MODEL_QUERY = query_param(
    "model", description="A text-to-speech model name or alias.", required=True
)

SCHEMAS: JSON = {
    "SpeechRequest": {
        "type": "object",
        "required": ["model", "input"],
        "properties": {
            "model": {"type": "string"},
            "input": {"type": "string", "description": "At most the model's max_input_chars."},
            "voice": {
                "oneOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "required": ["id"],
                        "properties": {"id": {"type": "string"}},
                    },
                ],
                "description": "A voice id; unknown ids get the default voice.",
            },
            "response_format": {
                "type": "string",
                "description": "wav (default), mp3 or pcm; opus, aac and flac fall back to "
                "wav or are refused, per model.",
            },
            "speed": {"type": "number", "minimum": 0.25, "maximum": 4.0},
            "quality": {"enum": ["standard", "high", "max"]},
            "instruction": {"type": "string"},
            "instructions": {"type": "string", "description": "OpenAI's name for instruction."},
            "stream_format": {"enum": ["sse", "audio"]},
            "stream": {"type": "boolean", "description": "true: the same as stream_format sse."},
        },
    },
    "Voice": {
        "type": "object",
        "required": ["id", "label", "builtin"],
        "properties": {
            "id": {"type": "string"},
            "label": {"type": "string"},
            "builtin": {"type": "boolean"},
            "status": {"const": "ready"},
            "lang": {"type": ["string", "null"]},
            "lang_key": {"type": "string"},
            "label_en": {"type": "string"},
            "gender": {"enum": ["M", "F"]},
            "age": {"enum": ["young", "adult", "mature"]},
            "category": {"type": "string"},
            "categories": {"type": "array", "items": {"type": "string"}},
            "tags": {"type": "array", "items": {"type": "string"}},
            "description": {"type": "string"},
            "description_en": {"type": "string"},
        },
    },
    "VoiceList": {
        "type": "object",
        "required": ["supports_custom", "voices"],
        "properties": {
            "supports_custom": {"type": "boolean"},
            "voices": {"type": "array", "items": ref("Voice")},
        },
    },
    "VoiceDeleted": {
        "type": "object",
        "required": ["id", "object", "deleted"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "audio.voice.deleted"},
            "deleted": {"const": True},
        },
    },
}

_AUDIO = {"schema": {"type": "string", "format": "binary"}}

PATHS: JSON = {
    "/v1/audio/speech": {
        "post": operation(
            "createSpeech",
            "Text to speech, relayed as it is made (raw audio or SSE events)",
            {
                "200": {
                    "description": "The audio, or `speech.audio.delta` events and a "
                    "`speech.audio.done` event with usage.",
                    "content": {
                        "audio/wav": _AUDIO,
                        "audio/mpeg": _AUDIO,
                        "audio/pcm": _AUDIO,
                        "text/event-stream": {"schema": {"type": "string"}},
                    },
                },
                "default": ERROR_REPLY,
            },
            requestBody=json_body(ref("SpeechRequest")),
        )
    },
    "/v1/audio/voices": {
        "get": operation(
            "listVoices",
            "The engine's voices with the catalogue's metadata, and the group's clones",
            json_reply("The voices", ref("VoiceList")),
            parameters=[_MODEL_QUERY],
        ),
        "post": operation(
            "createVoice",
            "Clone a voice from a 3 to 60 second clip (the id is g<group>__<label>); "
            "OpenAI's field names (name, audio_sample) are taken beside label and file",
            json_reply("The new voice", ref("Voice")),
            requestBody={
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "model": {"type": "string"},
                                "label": {"type": "string"},
                                "name": {"type": "string"},
                                "file": {"type": "string", "format": "binary"},
                                "audio_sample": {"type": "string", "format": "binary"},
                                "transcript": {"type": "string"},
                                "consent": {"type": "string"},
                                "type": {"const": "audio_sample"},
                            },
                        }
                    }
                },
            },
        ),
    },
    "/v1/audio/voices/{voice_id}": {
        "delete": operation(
            "deleteVoice",
            "Delete one of the group's clones (403 for a built-in or another group's voice)",
            json_reply("The deleted voice", ref("VoiceDeleted")),
            parameters=[path_param("voice_id"), _MODEL_QUERY],
        )
    },
}
