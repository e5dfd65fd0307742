"""/v1/realtime: a realtime session over WebSocket (``parley.api.realtime``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import ERROR_REPLY, operation, query_param

SCHEMAS: JSON = {}

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
}
