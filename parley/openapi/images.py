"""/v1/images/generations, /v1/images/edits and /v1/images/files/{image_id}
(``parley.api.images``, ``parley.api.image_files``)."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import ERROR_REPLY, json_body, operation, path_param, ref

_BINARY = {"type": "string", "format": "binary"}
_KINDS = ("png", "jpeg", "webp")
_FIELDS: JSON = {
    "model": {"type": "string", "description": "A model of kind `image`."},
    "prompt": {"type": "string", "minLength": 1, "maxLength": 32000},
    "n": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
    "size": {"type": "string", "description": "auto or WIDTHxHEIGHT (1024x1024)"},
    "quality": {"type": "string", "enum": ["auto", "hd", "high", "low", "medium", "standard"]},
    "background": {"type": "string", "enum": ["auto", "opaque", "transparent"]},
    "output_format": {"type": "string", "enum": ["jpeg", "png", "webp"]},
    "output_compression": {"type": "integer", "minimum": 0, "maximum": 100},
    "response_format": {
        "type": "string",
        "enum": ["b64_json", "url"],
        "default": "b64_json",
        "description": "url: a Parley URL, readable by the caller's group until it expires",
    },
    "stream": {"type": "boolean", "default": False},
    "partial_images": {"type": "integer", "minimum": 0, "maximum": 3},
    "style": {"type": "string", "enum": ["natural", "vivid"]},
    "moderation": {"type": "string", "enum": ["auto", "low"]},
    "user": {"type": "string"},
    "safety_identifier": {"type": "string"},
}
_EDIT_FIELDS: JSON = {
    **_FIELDS,
    "image": {
        "description": "PNG, JPEG or WebP (recognised from the bytes); several as image[]",
        **_BINARY,
    },
    "image[]": {"type": "array", "items": _BINARY},
    "mask": {"description": "PNG, JPEG or WebP; alpha 0 marks what to edit", **_BINARY},
    "input_fidelity": {"type": "string", "enum": ["high", "low"]},
}


def _replies() -> JSON:
    return {
        "200": {
            "description": "The images, whole or as image_generation.* / image_edit.* events",
            "content": {
                "application/json": {"schema": ref("ImagesResponse")},
                "text/event-stream": {"schema": {"type": "string"}},
            },
        },
        "default": ERROR_REPLY,
    }


SCHEMAS: JSON = {
    "ImageGenerationRequest": {
        "type": "object",
        "required": ["model", "prompt"],
        "additionalProperties": False,
        "properties": _FIELDS,
    },
    "ImagesResponse": {
        "type": "object",
        "required": ["created", "data", "usage"],
        "properties": {
            "created": {"type": "integer"},
            "data": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "b64_json": {"type": "string"},
                        "url": {"type": "string"},
                        "revised_prompt": {"type": "string"},
                    },
                },
            },
            "background": {"type": "string"},
            "output_format": {"type": "string"},
            "quality": {"type": "string"},
            "size": {"type": "string"},
            "usage": {
                "type": "object",
                "description": "What was billed: tokens (reported or estimated), images made",
                "properties": {
                    "input_tokens": {"type": "integer"},
                    "input_tokens_details": {"type": "object"},
                    "output_tokens": {"type": "integer"},
                    "total_tokens": {"type": "integer"},
                    "images": {"type": "integer"},
                },
            },
        },
    },
}

PATHS: JSON = {
    "/v1/images/generations": {
        "post": operation(
            "createImage",
            "Images from a prompt; billed per image by size and quality, or by tokens",
            _replies(),
            requestBody=json_body(ref("ImageGenerationRequest")),
        )
    },
    "/v1/images/edits": {
        "post": operation(
            "createImageEdit",
            "Images edited from uploaded ones (and a mask); billed like generations",
            _replies(),
            requestBody={
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "required": ["model", "prompt"],
                            "properties": _EDIT_FIELDS,
                        }
                    }
                },
            },
        )
    },
    "/v1/images/files/{image_id}": {
        "get": operation(
            "retrieveImageFile",
            "An image made for the caller's group with response_format url, until it expires",
            {
                "200": {
                    "description": "The image",
                    "content": {f"image/{kind}": {"schema": _BINARY} for kind in _KINDS},
                },
                "default": ERROR_REPLY,
            },
            parameters=[path_param("image_id")],
        )
    },
}
