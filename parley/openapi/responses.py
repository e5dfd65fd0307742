"""/v1/responses: OpenAI's Responses API (``parley.api.responses``) and its stored
responses (``parley.api.stored_responses``). Errors are the OpenAI envelope."""

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

_ITEM: JSON = {
    "type": "object",
    "description": "A `message` (`input_text`, `input_image`, `output_text` parts), "
    "`function_call`, `function_call_output` or `reasoning` item.",
    "properties": {"type": {"type": "string"}, "id": {"type": "string"}},
}

SCHEMAS: JSON = {
    "ResponsesRequest": {
        "type": "object",
        "required": ["model", "input"],
        "properties": {
            "model": {"type": "string", "description": "A name from GET /v1/models."},
            "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": _ITEM}]},
            "instructions": {"type": "string"},
            "tools": {
                "type": "array",
                "description": "`function` tools only; a built-in tool is a 400 naming it.",
                "items": {"type": "object", "required": ["type"]},
            },
            "tool_choice": {"oneOf": [{"type": "string"}, {"type": "object"}]},
            "parallel_tool_calls": {"type": "boolean"},
            "text": {
                "type": "object",
                "description": "`format`: `text`, `json_object` or `json_schema`.",
            },
            "max_output_tokens": {"type": "integer", "minimum": 1},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "top_p": {"type": "number", "minimum": 0, "maximum": 1},
            "reasoning": {"type": "object", "properties": {"effort": {"type": "string"}}},
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
            "store": {"type": "boolean", "default": True},
            "previous_response_id": {"type": "string"},
            "stream": {"type": "boolean", "description": "Reply as Responses events."},
            "background": {"type": "boolean", "description": "Only `false`."},
        },
    },
    "Response": {
        "type": "object",
        "description": "A `response`; with `stream: true`, `text/event-stream` events from "
        "`response.created` to `response.completed` (or `.incomplete`, `.failed`).",
        "required": ["id", "object", "created_at", "status", "model", "output"],
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string", "enum": ["response"]},
            "created_at": {"type": "integer"},
            "status": {"type": "string"},
            "model": {"type": "string"},
            "output": {"type": "array", "items": _ITEM},
            "usage": {"type": ["object", "null"]},
        },
    },
    "ResponseDeleted": {
        "type": "object",
        "required": ["id", "object", "deleted"],
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string", "enum": ["response"]},
            "deleted": {"type": "boolean"},
        },
    },
    "ResponseItemList": {
        "type": "object",
        "required": ["object", "data", "has_more"],
        "properties": {
            "object": {"type": "string", "enum": ["list"]},
            "data": {"type": "array", "items": _ITEM},
            "first_id": {"type": ["string", "null"]},
            "last_id": {"type": ["string", "null"]},
            "has_more": {"type": "boolean"},
        },
    },
}

_ID = path_param("response_id")

PATHS: JSON = {
    "/v1/responses": {
        "post": operation(
            "createResponse",
            "A response, whole or streamed, over any chat channel",
            {
                "200": {
                    "description": "The response",
                    "content": {
                        "application/json": {"schema": ref("Response")},
                        "text/event-stream": {"schema": {"type": "string"}},
                    },
                },
                "default": ERROR_REPLY,
            },
            requestBody=json_body(ref("ResponsesRequest")),
        )
    },
    "/v1/responses/{response_id}": {
        "get": operation(
            "getResponse",
            "A stored response of the caller's group",
            json_reply("The response", ref("Response")),
            parameters=[_ID],
        ),
        "delete": operation(
            "deleteResponse",
            "Delete a stored response of the caller's group",
            json_reply("Deleted", ref("ResponseDeleted")),
            parameters=[_ID],
        ),
    },
    "/v1/responses/{response_id}/input_items": {
        "get": operation(
            "listResponseInputItems",
            "A stored response's input items, paginated",
            json_reply("The items", ref("ResponseItemList")),
            parameters=[
                _ID,
                query_param("limit", {"type": "integer", "minimum": 1, "maximum": 100}),
                query_param("order", {"type": "string", "enum": ["asc", "desc"]}),
                query_param("after"),
                query_param("before"),
            ],
        )
    },
}
