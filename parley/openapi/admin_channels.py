"""The admin JSON API's channels (``parley.admin.api.list_channels``,
``parley.admin.channels``), as ``docs/admin-api.md`` states them. A credential is
write-only: no reply holds one."""

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

_WHEN = {"type": ["string", "null"]}
_SECONDS = {"type": "number", "exclusiveMinimum": 0}
_RATE = {"type": "number", "minimum": 0, "maximum": 1}
_TIMEOUTS: JSON = {
    "type": "object",
    "additionalProperties": False,
    "description": "Seconds; what is left out keeps its default.",
    "properties": {
        "connect": _SECONDS,
        "read": _SECONDS,
        "first_token": _SECONDS,
        "idle": _SECONDS,
        "total": {"type": ["number", "null"], "exclusiveMinimum": 0},
    },
}
_BREAKER: JSON = {
    "type": "object",
    "additionalProperties": False,
    "description": "The channel's circuit breaker (docs/operations.md).",
    "properties": {
        "enabled": {"type": "boolean"},
        "failures": {"type": "integer", "minimum": 1},
        "error_rate": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "window": {"type": "integer", "minimum": 2, "maximum": 1000},
        "min_calls": {"type": "integer", "minimum": 1},
        "cooldown_seconds": _SECONDS,
        "max_cooldown_seconds": _SECONDS,
    },
}
_HEALTH: JSON = {
    "type": "object",
    "additionalProperties": False,
    "description": "The channel's scheduled health check (docs/operations.md); off unless "
    "`interval_seconds` is set.",
    "properties": {
        "interval_seconds": {"type": ["number", "null"], "minimum": 0.01, "maximum": 86400},
        "disable_after": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000},
    },
}
_CHECK_VIEW: JSON = {
    "type": "object",
    "required": ["enabled", "interval_seconds", "disable_after", "last"],
    "properties": {
        "enabled": {"type": "boolean"},
        "interval_seconds": {"type": ["number", "null"]},
        "disable_after": {"type": ["integer", "null"]},
        "last": {
            "type": ["object", "null"],
            "description": "The latest check this server process ran (null before one).",
            "properties": {
                "at": {"type": "string"},
                "ok": {"type": "boolean", "description": "Every model answered."},
                "down": {"type": "boolean", "description": "Every model failed."},
                "failed_in_a_row": {"type": "integer"},
                "error": {"type": ["string", "null"]},
                "models": {"type": "array", "items": {"type": "object"}},
            },
        },
    },
}
_CHANNEL_FIELDS: JSON = {
    "type": {"type": "string", "description": "A channel type an adapter serves (openai…)."},
    "base_url": {"type": "string", "pattern": "^https?://"},
    "api_key": {
        "type": ["string", "null"],
        "maxLength": 4096,
        "description": "Sealed before it is stored, never shown again; null or empty: none.",
    },
    "models": {
        "type": "array",
        "description": "Models declared in the config file, by name or as {name, upstream}.",
        "items": {
            "oneOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "upstream": {"type": ["string", "null"]},
                    },
                },
            ]
        },
    },
    "priority": {"type": "integer"},
    "weight": {"type": "integer", "minimum": 1},
    "timeouts": _TIMEOUTS,
    "breaker": _BREAKER,
    "health": _HEALTH,
}
_BREAKER_VIEW: JSON = {
    "type": "object",
    "required": ["state", "calls", "errors", "error_rate", "failures_in_a_row"],
    "properties": {
        "model": {"type": "string", "description": "In `models`: the upstream model."},
        "state": {"enum": ["closed", "open", "half_open"]},
        "calls": {"type": "integer"},
        "errors": {"type": "integer"},
        "error_rate": _RATE,
        "failures_in_a_row": {"type": "integer"},
        "last_error": _WHEN,
        "last_failure_at": _WHEN,
        "next_probe_at": _WHEN,
    },
}

SCHEMAS: JSON = {
    "Channel": {
        "type": "object",
        "description": "A channel as shown: never its credential (`key_hint` at most).",
        "required": [
            "name",
            "type",
            "base_url",
            "has_api_key",
            "models",
            "priority",
            "weight",
            "timeouts",
            "health",
            "circuit",
            "source",
            "read_only",
            "disabled",
            "serving",
            "key_hint",
        ],
        "properties": {
            "name": {"type": "string"},
            "type": {"type": "string"},
            "base_url": {"type": "string", "description": "Without user info or query."},
            "has_api_key": {"type": "boolean"},
            "models": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "upstream"],
                    "properties": {"name": {"type": "string"}, "upstream": {"type": "string"}},
                },
            },
            "priority": {"type": "integer"},
            "weight": {"type": "integer"},
            "timeouts": {
                "type": "object",
                "required": ["connect", "read", "first_token", "idle", "total"],
                "properties": _TIMEOUTS["properties"],
            },
            "health": {
                "type": "object",
                "required": ["calls", "errors", "error_rate", "state"],
                "properties": {
                    "calls": {"type": "integer"},
                    "errors": {"type": "integer"},
                    "error_rate": _RATE,
                    "mean_latency_ms": {"type": ["number", "null"]},
                    "p95_latency_ms": {"type": ["number", "null"]},
                    "last_error_status": {"type": ["integer", "null"]},
                    "last_error_at": _WHEN,
                    "last_ok_at": _WHEN,
                    "state": {"enum": ["idle", "healthy", "degraded", "failing", "down"]},
                    "down_reason": {
                        "type": ["string", "null"],
                        "description": "Why it is down: the latest check's error, or its "
                        "open breaker's.",
                    },
                },
            },
            "circuit": {
                "oneOf": [
                    {"type": "null"},
                    {
                        "allOf": [_BREAKER_VIEW],
                        "type": "object",
                        "required": ["models"],
                        "properties": {"models": {"type": "array", "items": _BREAKER_VIEW}},
                    },
                ],
                "description": "Null when breakers are off.",
            },
            "check": _CHECK_VIEW,
            "source": {"enum": ["config", "database"]},
            "read_only": {"type": "boolean", "description": "True for the config file's."},
            "disabled": {"type": "boolean"},
            "serving": {"type": "boolean", "description": "Routed to by this server now."},
            "key_hint": {
                "type": ["string", "null"],
                "description": "A stored credential's last four characters after `…`.",
            },
            "disabled_at": {**_WHEN, "description": "Stored channels only."},
            "disabled_by": {
                "type": ["string", "null"],
                "description": "Who disabled it: an administrator, or `health-check`.",
            },
            "created_at": {"type": "string", "description": "Stored channels only."},
            "updated_at": {"type": "string", "description": "Stored channels only."},
        },
    },
    "NewChannel": {
        "type": "object",
        "required": ["name", "base_url", "models"],
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 64,
                "description": "Printable; not a config file channel's (400 `conflict`).",
            },
            **_CHANNEL_FIELDS,
        },
    },
    "ChannelChanges": {
        "type": "object",
        "description": "The fields given replace the stored ones; `api_key: null` removes "
        "the credential, a body without `api_key` keeps it.",
        "properties": _CHANNEL_FIELDS,
    },
    "ChannelDeleted": {
        "type": "object",
        "required": ["object", "name", "deleted"],
        "properties": {
            "object": {"const": "channel"},
            "name": {"type": "string"},
            "deleted": {"const": True},
        },
    },
    "ChannelTest": {
        "type": "object",
        "required": ["object", "channel", "model", "ok", "status", "latency_ms", "message"],
        "properties": {
            "object": {"const": "channel.test"},
            "channel": {"type": "string"},
            "model": {"type": "string"},
            "ok": {"type": "boolean"},
            "status": {
                "type": "integer",
                "description": "200, the upstream's error status, or the gateway's (502, 504).",
            },
            "latency_ms": {"type": "integer"},
            "message": {
                "type": ["string", "null"],
                "description": "The upstream's error, credentials taken out; null on success.",
            },
        },
    },
    "ChannelEvent": {
        "type": "object",
        "required": [
            "id",
            "created_at",
            "kind",
            "model",
            "state",
            "status",
            "latency_ms",
            "message",
            "actor",
        ],
        "properties": {
            "id": {"type": ["integer", "null"]},
            "created_at": {"type": "string"},
            "kind": {"enum": ["breaker", "test", "check"]},
            "model": {"type": ["string", "null"], "description": "Null: the whole channel."},
            "state": {
                "type": "string",
                "description": "A breaker's new state (open, half_open, closed) or a test's "
                "outcome (ok, failed).",
            },
            "status": {"type": ["integer", "null"]},
            "latency_ms": {"type": ["integer", "null"]},
            "message": {"type": ["string", "null"]},
            "actor": {"type": "string"},
        },
    },
    "ChannelHistory": list_of("ChannelEvent"),
    "ChannelsResealed": {
        "type": "object",
        "required": ["object", "resealed"],
        "properties": {
            "object": {"const": "channels.reseal"},
            "resealed": {"type": "integer", "minimum": 0},
        },
    },
}


def _on_channel(
    operation_id: str, summary: str, schema: str = "Channel", role: str = "operator", **more: Any
) -> JSON:
    """An operation on the channel named in the path (404 when there is none)."""
    reply = json_reply("The channel" if schema == "Channel" else "The outcome", ref(schema))
    return admin_operation(
        operation_id, summary, reply, role=role, parameters=[path_param("name")], **more
    )


_STORED_ONLY = "A config file channel is 403 `read_only_channel`: change it in the file."

PATHS: JSON = {
    "/admin/channels": {
        "get": admin_operation(
            "listChannels",
            "Every channel, the config file's first, without credentials, with live health",
            json_reply("The channels", list_of("Channel")),
        ),
        "post": admin_operation(
            "createChannel",
            "Store a channel and route to it at once",
            json_reply("The channel", ref("Channel"), status="201"),
            requestBody=json_body(ref("NewChannel")),
            role="operator",
            description="Its models must be declared in the config file; sending "
            "`api_key` while no secret key is configured is 503.",
        ),
    },
    "/admin/channels/reseal": {
        "post": admin_operation(
            "resealChannels",
            "Seal every stored credential with the first secret key",
            json_reply("How many were sealed", ref("ChannelsResealed")),
            role="owner",
            description="503 naming the channel no configured key opens, before "
            "anything is written.",
        )
    },
    "/admin/channels/{name}": {
        "get": _on_channel("getChannel", "One channel, as in the list", role="viewer"),
        "patch": _on_channel(
            "updateChannel",
            "Change a stored channel's fields",
            requestBody=json_body(ref("ChannelChanges")),
            description=_STORED_ONLY,
        ),
        "delete": _on_channel(
            "deleteChannel",
            "Forget a stored channel and its credential",
            "ChannelDeleted",
            description=_STORED_ONLY,
        ),
    },
    "/admin/channels/{name}/disable": {
        "post": _on_channel(
            "disableChannel",
            "Stop routing to a stored channel (kept, testable)",
            description=_STORED_ONLY,
        )
    },
    "/admin/channels/{name}/enable": {
        "post": _on_channel(
            "enableChannel", "Route to a disabled channel again", description=_STORED_ONLY
        )
    },
    "/admin/channels/{name}/test": {
        "post": _on_channel(
            "testChannel",
            "One minimal real call to one of the channel's models, timed",
            "ChannelTest",
            requestBody={
                "required": False,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {
                                "model": {
                                    "type": ["string", "null"],
                                    "description": "One the channel serves; absent or "
                                    "null: its first.",
                                }
                            },
                        }
                    }
                },
            },
            description="Enabled or not, the config file's or stored; at most 30 "
            "seconds, metered to no group, kept in the channel's history.",
        )
    },
    "/admin/channels/{name}/history": {
        "get": _on_channel(
            "channelHistory",
            "The channel's breaker transitions and tests, newest first (100)",
            "ChannelHistory",
            role="viewer",
        )
    },
}
