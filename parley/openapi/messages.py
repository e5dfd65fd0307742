"""/v1/messages and /v1/messages/count_tokens: Anthropic's Messages API
(``parley.api.messages``). Their errors are Anthropic's shape, not OpenAI's envelope."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import json_body, operation, ref

_BLOCKS: JSON = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {
                "type": "string",
                "description": "`text`, `image`, `tool_use`, `tool_result`, `thinking`...",
            }
        },
    },
}
_MESSAGE: JSON = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {
        "role": {"type": "string", "enum": ["user", "assistant"]},
        "content": {"oneOf": [{"type": "string"}, _BLOCKS]},
    },
}
_INPUT: JSON = {
    "model": {"type": "string", "description": "A name from GET /v1/models (or an alias)."},
    "messages": {"type": "array", "minItems": 1, "items": _MESSAGE},
    "system": {"oneOf": [{"type": "string"}, _BLOCKS]},
    "tools": {"type": "array", "items": {"type": "object"}},
    "tool_choice": {"type": "object"},
    "thinking": {"type": "object"},
}

SCHEMAS: JSON = {
    "MessagesRequest": {
        "type": "object",
        "required": ["model", "max_tokens", "messages"],
        "properties": {
            **_INPUT,
            "max_tokens": {"type": "integer", "minimum": 1},
            "stop_sequences": {"type": "array", "items": {"type": "string"}},
            "temperature": {"type": "number", "minimum": 0, "maximum": 1},
            "top_p": {"type": "number", "minimum": 0, "maximum": 1},
            "top_k": {"type": "integer", "minimum": 0},
            "metadata": {"type": "object", "properties": {"user_id": {"type": "string"}}},
            "stream": {"type": "boolean", "description": "Reply as Anthropic's events."},
        },
    },
    "Message": {
        "type": "object",
        "description": "A whole `message`; with `stream: true`, Anthropic's "
        "`text/event-stream` events from `message_start` to `message_stop`.",
        "required": ["id", "type", "role", "content", "stop_reason", "usage"],
        "properties": {
            "id": {"type": "string"},
            "type": {"type": "string", "enum": ["message"]},
            "role": {"type": "string", "enum": ["assistant"]},
            "model": {"type": "string"},
            "content": _BLOCKS,
            "stop_reason": {"type": ["string", "null"]},
            "stop_sequence": {"type": ["string", "null"]},
            "usage": {"type": "object"},
        },
    },
    "CountTokensRequest": {
        "type": "object",
        "required": ["model", "messages"],
        "properties": _INPUT,
    },
    "TokenCount": {
        "type": "object",
        "required": ["input_tokens"],
        "properties": {"input_tokens": {"type": "integer", "minimum": 0}},
    },
    "AnthropicError": {
        "type": "object",
        "description": "Anthropic's error shape: every reply of the Messages API that is "
        "not a success.",
        "required": ["type", "error"],
        "properties": {
            "type": {"type": "string", "enum": ["error"]},
            "error": {
                "type": "object",
                "required": ["type", "message"],
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
}

ANTHROPIC_ERROR_REPLY: JSON = {
    "description": "Anthropic's error shape, with the status that fits (400, 401, 403, 404, "
    "413, 429, 502, 503, 504…).",
    "content": {"application/json": {"schema": ref("AnthropicError")}},
}


def _replies(description: str, schema: JSON, *, events: bool = False) -> JSON:
    content: JSON = {"application/json": {"schema": schema}}
    if events:
        content["text/event-stream"] = {"schema": {"type": "string"}}
    return {
        "200": {"description": description, "content": content},
        "default": ANTHROPIC_ERROR_REPLY,
    }


PATHS: JSON = {
    "/v1/messages": {
        "post": operation(
            "createMessage",
            "Anthropic Messages: a message, whole or streamed (x-api-key or Bearer)",
            _replies("The message", ref("Message"), events=True),
            requestBody=json_body(ref("MessagesRequest")),
        )
    },
    "/v1/messages/count_tokens": {
        "post": operation(
            "countMessageTokens",
            "The input tokens of a Messages request",
            _replies("The count", ref("TokenCount")),
            requestBody=json_body(ref("CountTokensRequest")),
        )
    },
}
