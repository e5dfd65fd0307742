"""The admin JSON API's models managed live (``parley.admin.model_api``), as
``docs/admin-api.md`` states them: the config file's listed read-only, the stored ones
created, changed (a price at once or from a stated instant) and deleted."""

from __future__ import annotations

from typing import Any

from parley.domain.wire import JSON
from parley.openapi.components import (
    admin_operation,
    json_body,
    json_reply,
    list_of,
    path_param,
    ref,
)

_USD = {"type": "string", "description": "USD, as a decimal"}
_NAMES = {"type": "array", "items": {"type": "string"}}
_PRICES: JSON = {
    "type": "object",
    "additionalProperties": False,
    "description": "The config file's price fields (docs/configuration.md), USD; what is "
    "left out is not set.",
    "properties": {
        **{
            field: _USD
            for field in (
                "input_per_1k",
                "output_per_1k",
                "cached_input_per_1k",
                "cache_write_per_1k",
                "per_1k_characters",
                "per_minute",
                "per_search_unit",
                "image_input_per_1k",
                "batch_discount",
                "batch_input_per_1k",
                "batch_output_per_1k",
            )
        },
        "per_image": {"type": "object", "additionalProperties": _USD},
    },
}
_CHANNELS: JSON = {
    "type": "array",
    "maxItems": 50,
    "description": "The channels that serve it: a channel's name, or {channel, upstream}.",
    "items": {
        "oneOf": [
            {"type": "string"},
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["channel"],
                "properties": {"channel": {"type": "string"}, "upstream": {"type": "string"}},
            },
        ]
    },
}
_FIELDS: JSON = {
    "kind": {
        "enum": [
            "chat",
            "completion",
            "embedding",
            "speech",
            "transcription",
            "moderation",
            "rerank",
            "image",
        ]
    },
    "aliases": _NAMES,
    "retired_aliases": _NAMES,
    "context_window": {"type": ["integer", "null"], "minimum": 1},
    "vision": {"type": "boolean"},
    "owned_by": {"type": "string"},
    "channels": _CHANNELS,
    "prices": _PRICES,
    "enabled": {"type": "boolean"},
}
_WHEN = {"type": ["string", "null"]}

SCHEMAS: JSON = {
    "ModelEntry": {
        "type": "object",
        "description": "A model as the admin API shows it.",
        "required": ["name", "source", "read_only", "kind", "channels", "prices", "enabled"],
        "properties": {
            "object": {"const": "model.entry"},
            "name": {"type": "string"},
            "source": {"enum": ["config", "database"]},
            "read_only": {"type": "boolean"},
            **_FIELDS,
            "channels": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "channel": {"type": "string"},
                        "upstream": {"type": "string"},
                    },
                },
            },
            "prices_from": _WHEN,
            "next_prices": {**_PRICES, "type": ["object", "null"]},
            "next_prices_from": _WHEN,
            "serving": {"type": "boolean", "description": "Callers can reach it now."},
            "created_at": {"type": "string"},
            "updated_at": {"type": "string"},
        },
    },
    "NewModel": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "maxLength": 200, "pattern": r"^[^\s/]+$"},
            **_FIELDS,
        },
    },
    "ModelChanges": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            **_FIELDS,
            "effective_from": {
                "type": "string",
                "format": "date-time",
                "description": "With `prices`: the instant they take effect (with its zone); "
                "absent or past: at once.",
            },
            "next_prices": {"type": "null", "description": "Cancel a scheduled change."},
        },
    },
    "ModelDeleted": {
        "type": "object",
        "required": ["object", "name", "deleted"],
        "properties": {
            "object": {"const": "model.entry"},
            "name": {"type": "string"},
            "deleted": {"const": True},
        },
    },
}

_STORED_ONLY = "A config file model is 403 `read_only_model`: change it in the file."


def _on_model(
    operation_id: str, summary: str, schema: str = "ModelEntry", role: str = "operator", **more: Any
) -> JSON:
    """An operation on the model named in the path (404 when there is none)."""
    reply = json_reply("The model" if schema == "ModelEntry" else "The outcome", ref(schema))
    return admin_operation(
        operation_id, summary, reply, role=role, parameters=[path_param("name")], **more
    )


PATHS: JSON = {
    "/admin/models": {
        "get": admin_operation(
            "listModels",
            "Every model, the config file's first (read-only), then those managed live",
            json_reply("The models", list_of("ModelEntry")),
        ),
        "post": admin_operation(
            "createModel",
            "Store a model and serve it at once",
            json_reply("The model", ref("ModelEntry"), status="201"),
            requestBody=json_body(ref("NewModel")),
            role="operator",
            description="409 `conflict` for a name or alias of the config file or of "
            "another stored model; 400 naming the field for anything invalid.",
        ),
    },
    "/admin/models/{name}": {
        "get": _on_model("getModel", "One model, as in the list", role="viewer"),
        "patch": _on_model(
            "updateModel",
            "Change a stored model's fields; a price at once or from `effective_from`",
            requestBody=json_body(ref("ModelChanges")),
            description=_STORED_ONLY,
        ),
        "delete": _on_model(
            "deleteModel", "Forget a stored model", "ModelDeleted", description=_STORED_ONLY
        ),
    },
}
