"""/v1/chat/completions and /v1/completions (``parley.api.chat``, ``parley.api.completions``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import json_body, json_reply, operation, ref

_SHARED_FIELDS: JSON = {
    "model": {"type": "string", "description": "A name from GET /v1/models (or an alias)."},
    "stream": {"type": "boolean", "description": "Reply as Server-Sent Events."},
    "stream_options": {
        "type": "object",
        "description": "Only with `stream: true`.",
        "properties": {"include_usage": {"type": "boolean"}},
    },
    "max_tokens": {"type": "integer", "minimum": 1},
    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
    "top_p": {"type": "number", "minimum": 0, "maximum": 1},
}

_CONTENT_PART: JSON = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"type": "string", "description": "`text` or `image_url` (vision models)."},
        "text": {"type": "string"},
        "image_url": {"type": "object", "properties": {"url": {"type": "string"}}},
    },
}

SCHEMAS: JSON = {
    "ChatMessage": {
        "type": "object",
        "required": ["role", "content"],
        "properties": {
            "role": {
                "type": "string",
                "enum": ["system", "developer", "user", "assistant", "tool", "function"],
            },
            "content": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "array", "items": _CONTENT_PART},
                ]
            },
        },
    },
    "ChatCompletionRequest": {
        "type": "object",
        "required": ["model", "messages"],
        "properties": {
            **_SHARED_FIELDS,
            "messages": {"type": "array", "minItems": 1, "items": ref("ChatMessage")},
            "max_completion_tokens": {"type": "integer", "minimum": 1},
        },
    },
    "CompletionRequest": {
        "type": "object",
        "required": ["model", "prompt"],
        "properties": {
            **_SHARED_FIELDS,
            "prompt": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "array", "minItems": 1, "items": {"type": "string"}},
                    {"type": "array", "minItems": 1, "items": {"type": "integer"}},
                ]
            },
        },
    },
    "Usage": {
        "type": "object",
        "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
        "properties": {
            "prompt_tokens": {"type": "integer"},
            "completion_tokens": {"type": "integer"},
            "total_tokens": {"type": "integer"},
        },
    },
    "Completion": {
        "type": "object",
        "description": "A whole reply (`chat.completion` or `text_completion`); with "
        "`stream: true`, `text/event-stream` chunks ending with `data: [DONE]`.",
        "required": ["id", "object", "choices", "usage"],
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string"},
            "model": {"type": "string"},
            "choices": {"type": "array", "items": {"type": "object"}},
            "usage": ref("Usage"),
        },
    },
}

PATHS: JSON = {
    "/v1/chat/completions": {
        "post": operation(
            "createChatCompletion",
            "Chat completion, whole or streamed",
            json_reply("The completion", ref("Completion")),
            requestBody=json_body(ref("ChatCompletionRequest")),
        )
    },
    "/v1/completions": {
        "post": operation(
            "createCompletion",
            "Classic completion, whole or streamed",
            json_reply("The completion", ref("Completion")),
            requestBody=json_body(ref("CompletionRequest")),
        )
    },
}
