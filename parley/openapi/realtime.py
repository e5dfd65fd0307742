"""/v1/realtime: a realtime session over WebSocket (``parley.api.realtime``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import (
    ERROR_REPLY,
    json_body,
    json_reply,
    operation,
    query_param,
    ref,
)

SCHEMAS: JSON = {
    "ClientSecretRequest": {
        "type": "object",
        "properties": {
            "expires_after": {
                "type": "object",
                "properties": {
                    "anchor": {"const": "created_at"},
                    "seconds": {"type": "integer", "minimum": 10, "maximum": 3600},
                },
            },
            "session": {
                "type": "object",
                "description": "A realtime or transcription session configuration; its "
                "model binds the secret to that model.",
                "properties": {
                    "type": {"enum": ["realtime", "transcription"]},
                    "model": {"type": "string"},
                },
            },
        },
    },
    "ClientSecret": {
        "type": "object",
        "required": ["value", "expires_at", "session"],
        "properties": {
            "value": {"type": "string", "description": "ek_..., shown once."},
            "expires_at": {"type": "integer"},
            "session": {"type": "object"},
        },
    },
}

PATHS: JSON = {
    "/v1/realtime": {
        "get": operation(
            "realtimeSession",
            "A realtime session: upgraded to a WebSocket speaking OpenAI's Realtime "
            "protocol (GA events), relayed to the model's upstream; each response.create "
            "is admitted and each response.done metered (docs/realtime.md)",
            {
                "101": {"description": "Switching protocols: the session's WebSocket."},
                "default": ERROR_REPLY,
            },
            parameters=[
                query_param(
                    "model", description="A kind: realtime model name or alias.", required=True
                )
            ],
        )
    },
    "/v1/realtime/client_secrets": {
        "post": operation(
            "createRealtimeClientSecret",
            "A short-lived ek_ secret that opens realtime sessions only (a browser sends "
            "it in the openai-insecure-api-key.<secret> subprotocol)",
            json_reply("The secret", ref("ClientSecret")),
            requestBody=json_body(ref("ClientSecretRequest")),
        )
    },
}
