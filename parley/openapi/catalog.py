"""/v1/models and /v1/capabilities (``parley.api.models``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import json_reply, operation, path_param, ref

SCHEMAS: JSON = {
    "Model": {
        "type": "object",
        "required": ["id", "object", "created", "owned_by"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "model"},
            "created": {"type": "integer"},
            "owned_by": {"type": "string"},
            "kind": {"type": "string"},
            "context_window": {"type": ["integer", "null"]},
            "vision": {"type": "boolean"},
            "aliases": {"type": "array", "items": {"type": "string"}},
            "endpoints": {"type": "array", "items": {"type": "string"}},
            "capabilities": {"type": "array", "items": {"type": "string"}},
            "pricing": {"type": "object"},
        },
    },
    "ModelList": {
        "type": "object",
        "required": ["object", "data"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": ref("Model")},
        },
    },
    "CapabilityList": {
        "type": "object",
        "required": ["object", "data", "capabilities"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": {"type": "object"}},
            "capabilities": {
                "type": "object",
                "description": "Capability key (e.g. LLM_CHAT) → model name.",
                "additionalProperties": {"type": "string"},
            },
        },
    },
}

PATHS: JSON = {
    "/v1/models": {
        "get": operation(
            "listModels",
            "The models the key's group may use",
            json_reply("The models", ref("ModelList")),
        )
    },
    "/v1/models/{model}": {
        "get": operation(
            "retrieveModel",
            "One model (a retired alias answers with a `Deprecation` header)",
            json_reply("The model", ref("Model")),
            parameters=[path_param("model")],
        )
    },
    "/v1/capabilities": {
        "get": operation(
            "listCapabilities",
            "Capability keys and the models behind them",
            json_reply("The capabilities", ref("CapabilityList")),
        )
    },
}
