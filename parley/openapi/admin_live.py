"""The admin JSON API's newer half (``docs/admin-api.md``): a key as a product (read,
changed, rotated), channels managed live (added, changed, disabled, tested, their
history), administrator accounts, and a model's built-in voices. The older half is
``admin.py``; both take the admin token or an administrator's HTTP Basic credentials."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import json_body, json_reply, operation, path_param, query_param
from parley.openapi.components import ref as _ref

_NULLABLE_LIMIT = {"type": ["integer", "null"], "minimum": 0}
_TIMEOUTS: JSON = {
    "type": "object",
    "properties": {
        name: {"type": ["number", "null"], "exclusiveMinimum": 0}
        for name in ("connect", "read", "first_token", "idle", "total")
    },
}
_CHANNEL_FIELDS: JSON = {
    "type": {"type": "string", "description": "A channel type an adapter serves."},
    "base_url": {"type": "string"},
    "api_key": {"type": ["string", "null"], "description": "Sealed; never shown again."},
    "models": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "upstream": {"type": "string"}},
        },
    },
    "priority": {"type": "integer"},
    "weight": {"type": "integer", "minimum": 1},
    "timeouts": _TIMEOUTS,
    "breaker": {"type": "object"},
}
_ROLE = {"enum": ["owner", "operator", "viewer"]}

SCHEMAS: JSON = {
    "KeyDetail": {
        "allOf": [_ref("Key")],
        "type": "object",
        "properties": {
            "models": {"type": ["array", "null"], "items": {"type": "string"}},
            "budget_usd": {"type": ["number", "null"]},
            "previous_secret_valid_until": {"type": ["string", "null"]},
            "budget": {"type": "object", "description": "GET only: this period's spend."},
        },
    },
    "KeyChanges": {
        "type": "object",
        "description": "A field set to null clears it (back to the group's); one left out is kept.",
        "properties": {
            "name": {"type": "string"},
            "rpm": _NULLABLE_LIMIT,
            "tpm": _NULLABLE_LIMIT,
            "models": {"type": ["array", "null"], "items": {"type": "string"}},
            "budget_usd": {"type": ["number", "null"], "minimum": 0},
            "expires_at": {"type": ["string", "null"], "description": "ISO 8601 time"},
            "expires_in_days": {"type": "integer", "minimum": 1},
        },
    },
    "Rotation": {
        "type": "object",
        "properties": {"grace_seconds": {"type": "integer", "minimum": 0}},
    },
    "NewChannel": {
        "type": "object",
        "required": ["name", "type", "base_url", "models"],
        "properties": {"name": {"type": "string", "minLength": 1}, **_CHANNEL_FIELDS},
    },
    "ChannelChanges": {"type": "object", "properties": _CHANNEL_FIELDS},
    "ChannelTest": {
        "type": "object",
        "required": ["object", "channel", "model", "ok", "status", "latency_ms", "message"],
        "properties": {
            "object": {"const": "channel.test"},
            "channel": {"type": "string"},
            "model": {"type": "string"},
            "ok": {"type": "boolean"},
            "status": {"type": "integer"},
            "latency_ms": {"type": "integer"},
            "message": {"type": ["string", "null"]},
        },
    },
    "ChannelEvent": {
        "type": "object",
        "required": ["id", "created_at", "kind"],
        "properties": {
            "id": {"type": "integer"},
            "created_at": {"type": "string"},
            "kind": {"enum": ["breaker", "test"]},
            "model": {"type": ["string", "null"]},
            "state": {"type": ["string", "null"]},
            "status": {"type": ["integer", "null"]},
            "latency_ms": {"type": ["integer", "null"]},
            "message": {"type": ["string", "null"]},
            "actor": {"type": ["string", "null"]},
        },
    },
    "Deleted": {
        "type": "object",
        "required": ["object", "name", "deleted"],
        "properties": {
            "object": {"type": "string"},
            "name": {"type": "string"},
            "deleted": {"const": True},
        },
    },
    "Account": {
        "type": "object",
        "required": ["object", "name", "role", "disabled"],
        "properties": {
            "object": {"const": "admin.account"},
            "name": {"type": "string"},
            "role": _ROLE,
            "disabled": {"type": "boolean"},
            "disabled_at": {"type": ["string", "null"]},
            "created_at": {"type": ["string", "null"]},
            "updated_at": {"type": ["string", "null"]},
        },
    },
    "NewAccount": {
        "type": "object",
        "required": ["name", "role", "password"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 64},
            "role": _ROLE,
            "password": {"type": "string", "minLength": 12, "maxLength": 1024},
        },
    },
    "AccountChanges": {
        "type": "object",
        "properties": {
            "role": _ROLE,
            "password": {"type": "string", "minLength": 12, "maxLength": 1024},
            "disabled": {"type": "boolean"},
        },
    },
    "Resealed": {
        "type": "object",
        "required": ["object", "resealed"],
        "properties": {"object": {"const": "channels.reseal"}, "resealed": {"type": "integer"}},
    },
    "BuiltinVoices": {
        "type": "object",
        "required": ["object", "model", "data"],
        "properties": {
            "object": {"const": "list"},
            "model": {"type": "string"},
            "data": {"type": "array", "items": {"type": "object"}},
        },
    },
}


def _admin(operation_id: str, summary: str, responses: JSON, **more: object) -> JSON:
    return operation(operation_id, summary, responses, security="adminToken", **more)


def _list_of(name: str) -> JSON:
    return {
        "type": "object",
        "required": ["object", "data"],
        "properties": {"object": {"const": "list"}, "data": {"type": "array", "items": _ref(name)}},
    }


_KEY = [path_param("key_id", "integer")]
_CHANNEL = [path_param("name")]
_ACCOUNT = [path_param("name")]


def _on_channel(operation_id: str, summary: str, **more: object) -> JSON:
    reply = json_reply("The channel", _ref("Channel"))
    return _admin(operation_id, summary, reply, parameters=_CHANNEL, **more)


PATHS: JSON = {
    "/admin/keys/{key_id}": {
        "get": _admin(
            "getKey",
            "One key (never the secret), with its own budget this period",
            json_reply("The key", _ref("KeyDetail")),
            parameters=_KEY,
        ),
        "patch": _admin(
            "updateKey",
            "Change a key's label, rates, models, budget or expiry",
            json_reply("The key", _ref("KeyDetail")),
            parameters=_KEY,
            requestBody=json_body(_ref("KeyChanges")),
        ),
        "delete": _admin(
            "revokeKey",
            "Revoke a key",
            json_reply("The revoked key", _ref("Key")),
            parameters=_KEY,
        ),
    },
    "/admin/keys/{key_id}/rotate": {
        "post": _admin(
            "rotateKey",
            "A new secret (in this reply only); the old one works for the grace",
            json_reply("The key, with its new secret as `key`", _ref("KeyDetail")),
            parameters=_KEY,
            requestBody={"content": {"application/json": {"schema": _ref("Rotation")}}},
        )
    },
    "/admin/channels": {
        "get": _admin(
            "listChannels",
            "Every channel, the config file's first (no credentials), with live health",
            json_reply("The channels", _list_of("Channel")),
        ),
        "post": _admin(
            "createChannel",
            "Add a channel live (its credential sealed)",
            json_reply("The channel", _ref("Channel"), status="201"),
            requestBody=json_body(_ref("NewChannel")),
        ),
    },
    "/admin/channels/reseal": {
        "post": _admin(
            "resealChannels",
            "Seal every stored credential with the first secret key",
            json_reply("How many were resealed", _ref("Resealed")),
        )
    },
    "/admin/channels/{name}": {
        "get": _on_channel("getChannel", "One channel (no credential), with its health"),
        "patch": _on_channel(
            "updateChannel",
            "Change a stored channel's fields (api_key null removes it)",
            requestBody=json_body(_ref("ChannelChanges")),
        ),
        "delete": _admin(
            "deleteChannel",
            "Forget a stored channel and its credential",
            json_reply("The deletion", _ref("Deleted")),
            parameters=_CHANNEL,
        ),
    },
    "/admin/channels/{name}/disable": {
        "post": _on_channel("disableChannel", "Stop routing to a stored channel (kept)")
    },
    "/admin/channels/{name}/enable": {
        "post": _on_channel("enableChannel", "Route to a disabled stored channel again")
    },
    "/admin/channels/{name}/test": {
        "post": _admin(
            "testChannel",
            "One minimal real call to one of the channel's models, not metered",
            json_reply("The outcome", _ref("ChannelTest")),
            parameters=_CHANNEL,
            requestBody={
                "content": {
                    "application/json": {
                        "schema": {"type": "object", "properties": {"model": {"type": "string"}}}
                    }
                }
            },
        )
    },
    "/admin/channels/{name}/history": {
        "get": _admin(
            "channelHistory",
            "The channel's breaker transitions and tests, newest first",
            json_reply("The events", _list_of("ChannelEvent")),
            parameters=_CHANNEL,
        )
    },
    "/admin/accounts": {
        "get": _admin(
            "listAccounts", "Every administrator", json_reply("The accounts", _list_of("Account"))
        ),
        "post": _admin(
            "createAccount",
            "Add an administrator",
            json_reply("The account", _ref("Account"), status="201"),
            requestBody=json_body(_ref("NewAccount")),
        ),
    },
    "/admin/accounts/{name}": {
        "patch": _admin(
            "updateAccount",
            "Change an administrator's role or password, or disable it",
            json_reply("The account", _ref("Account")),
            parameters=_ACCOUNT,
            requestBody=json_body(_ref("AccountChanges")),
        ),
        "delete": _admin(
            "deleteAccount",
            "Forget an administrator (its audit entries stay)",
            json_reply("The deletion", _ref("Deleted")),
            parameters=_ACCOUNT,
        ),
    },
    "/admin/voices/roster": {
        "get": _admin(
            "builtinVoices",
            "A speech model's built-in voices",
            json_reply("The voices", _ref("BuiltinVoices")),
            parameters=[query_param("model", required=True, description="A speech model")],
        )
    },
}
