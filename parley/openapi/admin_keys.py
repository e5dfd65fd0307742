"""The admin JSON API's one key as a product (``parley.admin.key_api``: read it with its
own budget, change it, rotate its secret, revoke it), administrator accounts
(``parley.admin.accounts``) and a speech model's built-in voices (``parley.admin.roster``),
as ``docs/admin-api.md`` states them."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import (
    admin_operation,
    json_body,
    json_reply,
    list_of,
    path_param,
    query_param,
    ref,
)

_MAX_INT = 2_147_483_647
_LIMIT = {"type": ["integer", "null"], "minimum": 1, "maximum": _MAX_INT}
_KEY_ID = [path_param("key_id", "integer")]
_UNKNOWN_KEY = "An id no key has is 404."
_WHEN = {"type": ["string", "null"]}
_ROLE = {"enum": ["viewer", "operator", "owner"]}
_PASSWORD = {"type": "string", "minLength": 12, "maxLength": 1024}

SCHEMAS: JSON = {
    "KeyBudget": {
        "type": "object",
        "required": ["period", "period_start", "period_end", "limit_usd", "spent_usd"],
        "properties": {
            "period": {"enum": ["month", "day"]},
            "period_start": {"type": "string"},
            "period_end": {"type": "string"},
            "limit_usd": {"type": ["number", "null"]},
            "spent_usd": {"type": "number"},
            "remaining_usd": {"type": ["number", "null"]},
        },
    },
    "KeyDetail": {
        "allOf": [ref("Key")],
        "type": "object",
        "required": ["budget"],
        "properties": {
            "budget": {
                **ref("KeyBudget"),
                "description": "The key's own budget and its spend this period.",
            }
        },
    },
    "KeyChanges": {
        "type": "object",
        "description": "A field set to null is cleared (back to the group's, or never "
        "expiring); a field left out is kept.",
        "properties": {
            "name": {"type": ["string", "null"], "maxLength": 200},
            "rpm": _LIMIT,
            "tpm": _LIMIT,
            "models": {"type": ["array", "null"], "items": {"type": "string", "maxLength": 200}},
            "budget_usd": {"type": ["number", "null"], "minimum": 0, "maximum": 1_000_000_000},
            "expires_at": {
                "type": ["string", "null"],
                "maxLength": 40,
                "description": "ISO 8601; a time without a zone is UTC, a past one expires "
                "the key now.",
            },
            "expires_in_days": {**_LIMIT, "description": "Instead of expires_at."},
        },
    },
    "KeyRotation": {
        "type": "object",
        "properties": {
            "grace_seconds": {
                "type": "integer",
                "minimum": 0,
                "maximum": 2_592_000,
                "description": "How long the old secret stays valid (default 3600).",
            }
        },
    },
    "VoiceRoster": {
        "type": "object",
        "required": ["object", "model", "data"],
        "properties": {
            "object": {"const": "list"},
            "model": {"type": "string"},
            "data": {"type": "array", "items": ref("Voice")},
        },
    },
    "Account": {
        "type": "object",
        "description": "An administrator account (never its password or hash).",
        "required": ["object", "name", "role", "disabled", "disabled_at", "created_at"],
        "properties": {
            "object": {"const": "admin.account"},
            "name": {"type": "string"},
            "role": _ROLE,
            "disabled": {"type": "boolean"},
            "disabled_at": _WHEN,
            "created_at": _WHEN,
            "updated_at": _WHEN,
        },
    },
    "NewAccount": {
        "type": "object",
        "required": ["name", "role", "password"],
        "properties": {
            "name": {
                "type": "string",
                "pattern": "^[a-z0-9][a-z0-9._-]{0,63}$",
                "description": "Not `token`, `cli` or `breaker` (the audit log's other actors).",
            },
            "role": _ROLE,
            "password": _PASSWORD,
        },
    },
    "AccountChanges": {
        "type": "object",
        "description": "A field left out or null is kept.",
        "properties": {
            "role": {"enum": [*_ROLE["enum"], None]},
            "password": {**_PASSWORD, "type": ["string", "null"]},
            "disabled": {"type": ["boolean", "null"]},
        },
    },
    "AccountDeleted": {
        "type": "object",
        "required": ["object", "name", "deleted"],
        "properties": {
            "object": {"const": "admin.account"},
            "name": {"type": "string"},
            "deleted": {"const": True},
        },
    },
}

PATHS: JSON = {
    "/admin/keys/{key_id}": {
        "get": admin_operation(
            "getKey",
            "One key (never the secret), with its own budget this period",
            json_reply("The key", ref("KeyDetail")),
            parameters=_KEY_ID,
            description=_UNKNOWN_KEY,
        ),
        "patch": admin_operation(
            "updateKey",
            "Change a key's label, rates, models, budget or expiry",
            json_reply("The key", ref("Key")),
            parameters=_KEY_ID,
            requestBody=json_body(ref("KeyChanges")),
            role="operator",
            description=_UNKNOWN_KEY,
        ),
        "delete": admin_operation(
            "revokeKey",
            "Revoke a key (revoking twice keeps the first time)",
            json_reply("The revoked key", ref("Key")),
            role="operator",
            parameters=_KEY_ID,
            description=_UNKNOWN_KEY,
        ),
    },
    "/admin/keys/{key_id}/rotate": {
        "post": admin_operation(
            "rotateKey",
            "A new secret for the key (in this reply only); the old one works for "
            "grace_seconds more",
            json_reply("The key, with its new secret as `key`", ref("Key")),
            role="operator",
            parameters=_KEY_ID,
            requestBody={
                "required": False,
                "content": {"application/json": {"schema": ref("KeyRotation")}},
            },
            description=_UNKNOWN_KEY,
        )
    },
    "/admin/voices/roster": {
        "get": admin_operation(
            "voiceRoster",
            "A speech model's built-in voices: its engine's roster with its catalogue",
            json_reply("The voices", ref("VoiceRoster")),
            parameters=[query_param("model", description="A speech model's name", required=True)],
            description="An unknown model is 404 `model_not_found`; a model whose "
            "engine lists no voices 404 `voices_not_supported`; an engine that does not "
            "answer 502 or 503.",
        )
    },
    "/admin/accounts": {
        "get": admin_operation(
            "listAccounts",
            "Every administrator account",
            json_reply("The accounts", list_of("Account")),
            role="owner",
        ),
        "post": admin_operation(
            "createAccount",
            "Create an administrator account",
            json_reply("The account", ref("Account"), status="201"),
            requestBody=json_body(ref("NewAccount")),
            role="owner",
            description="A name taken is 400 `conflict`.",
        ),
    },
    "/admin/accounts/{name}": {
        "patch": admin_operation(
            "updateAccount",
            "Change an account's role, password or disabled state (applies at once)",
            json_reply("The account", ref("Account")),
            parameters=[path_param("name")],
            requestBody=json_body(ref("AccountChanges")),
            role="owner",
        ),
        "delete": admin_operation(
            "deleteAccount",
            "Forget an account (its audit entries stay)",
            json_reply("The deleted account", ref("AccountDeleted")),
            role="owner",
            parameters=[path_param("name")],
        ),
    },
}
