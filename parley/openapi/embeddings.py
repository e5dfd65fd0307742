"""/v1/embeddings (``parley.api.embeddings``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import json_body, json_reply, operation, ref

_TOKENS: JSON = {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}

SCHEMAS: JSON = {
    "EmbeddingRequest": {
        "type": "object",
        "required": ["model", "input"],
        "properties": {
            "model": {"type": "string", "description": "A model of kind `embedding`."},
            "input": {
                "description": "At most 2048 items, none empty, not mixed.",
                "oneOf": [
                    {"type": "string", "minLength": 1},
                    {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 2048,
                        "items": {"type": "string", "minLength": 1},
                    },
                    _TOKENS,
                    {"type": "array", "minItems": 1, "maxItems": 2048, "items": _TOKENS},
                ],
            },
            "encoding_format": {"type": "string", "enum": ["float", "base64"]},
            "dimensions": {"type": "integer", "minimum": 1},
            "user": {"type": "string"},
        },
    },
    "EmbeddingList": {
        "type": "object",
        "required": ["object", "data", "model", "usage"],
        "properties": {
            "object": {"type": "string", "enum": ["list"]},
            "data": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "object": {"type": "string"},
                        "index": {"type": "integer"},
                        "embedding": {
                            "oneOf": [
                                {"type": "array", "items": {"type": "number"}},
                                {"type": "string", "description": "base64 float32"},
                            ]
                        },
                    },
                },
            },
            "model": {"type": "string"},
            "usage": {
                "type": "object",
                "properties": {
                    "prompt_tokens": {"type": "integer"},
                    "total_tokens": {"type": "integer"},
                },
            },
        },
    },
}

PATHS: JSON = {
    "/v1/embeddings": {
        "post": operation(
            "createEmbedding",
            "Embeddings of text or token arrays, metered by input tokens",
            json_reply("The embeddings", ref("EmbeddingList")),
            requestBody=json_body(ref("EmbeddingRequest")),
        )
    },
}
