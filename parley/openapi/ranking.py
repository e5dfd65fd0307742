"""/v1/moderations (``parley.api.moderations``), /v1/rerank and /v2/rerank
(``parley.api.rerank``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import json_body, json_reply, operation, ref

_USAGE: JSON = {
    "type": "object",
    "properties": {"prompt_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}},
}
_PART: JSON = {
    "oneOf": [
        {
            "type": "object",
            "required": ["type", "text"],
            "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
        },
        {
            "type": "object",
            "required": ["type", "image_url"],
            "properties": {
                "type": {"const": "image_url"},
                "image_url": {
                    "type": "object",
                    "required": ["url"],
                    "properties": {"url": {"type": "string"}},
                },
            },
        },
    ]
}
_DOCUMENT: JSON = {
    "oneOf": [
        {"type": "string"},
        {
            "type": "object",
            "description": "Ranked by its `text`, or by the fields `rank_fields` names.",
        },
    ]
}

SCHEMAS: JSON = {
    "ModerationRequest": {
        "type": "object",
        "required": ["input"],
        "properties": {
            "model": {
                "type": "string",
                "description": "A model of kind `moderation`; `omni-moderation-latest` if absent.",
            },
            "input": {
                "oneOf": [
                    {"type": "string"},
                    {"type": "array", "minItems": 1, "maxItems": 2048, "items": {"type": "string"}},
                    {"type": "array", "minItems": 1, "maxItems": 2048, "items": _PART},
                ]
            },
        },
    },
    "Moderation": {
        "type": "object",
        "required": ["id", "model", "results", "usage"],
        "properties": {
            "id": {"type": "string"},
            "model": {"type": "string"},
            "results": {"type": "array", "items": {"type": "object"}},
            "usage": _USAGE,
        },
    },
    "RerankRequest": {
        "type": "object",
        "required": ["model", "query", "documents"],
        "additionalProperties": False,
        "properties": {
            "model": {"type": "string", "description": "A model of kind `rerank`."},
            "query": {"type": "string", "minLength": 1},
            "documents": {"type": "array", "minItems": 1, "maxItems": 1000, "items": _DOCUMENT},
            "top_n": {"type": "integer", "minimum": 0, "description": "0 or absent: all."},
            "return_documents": {"type": "boolean"},
            "rank_fields": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        },
    },
    "Rerank": {
        "type": "object",
        "required": ["id", "model", "results", "meta", "usage"],
        "properties": {
            "id": {"type": "string"},
            "model": {"type": "string"},
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["index", "relevance_score"],
                    "properties": {
                        "index": {"type": "integer"},
                        "relevance_score": {"type": "number"},
                        "document": {"description": "The caller's document, when asked."},
                    },
                },
            },
            "meta": {
                "type": "object",
                "properties": {
                    "api_version": {"type": "object"},
                    "billed_units": {
                        "type": "object",
                        "properties": {"search_units": {"type": "integer"}},
                    },
                },
            },
            "usage": _USAGE,
        },
    },
}


def _rerank(name: str, summary: str) -> JSON:
    return {
        "post": operation(
            name,
            summary,
            json_reply("The documents, best first", ref("Rerank")),
            requestBody=json_body(ref("RerankRequest")),
        )
    }


PATHS: JSON = {
    "/v1/moderations": {
        "post": operation(
            "createModeration",
            "Moderation of text and images, metered by input tokens",
            json_reply("The moderation", ref("Moderation")),
            requestBody=json_body(ref("ModerationRequest")),
        )
    },
    "/v1/rerank": _rerank("rerank", "Documents ranked by relevance to a query (Jina's shape)"),
    "/v2/rerank": _rerank("rerankV2", "The same, at the path Cohere's v2 clients call"),
}
