"""/admin/groups and /admin/keys (``parley.admin.api``), with the operator's admin token."""

from __future__ import annotations

from parley.openapi.components import JSON, json_body, json_reply, operation, ref

_LIMIT = {"type": ["integer", "null"], "minimum": 1}
_GROUP_FIELDS: JSON = {
    "rpm": _LIMIT,
    "tpm": _LIMIT,
    "models": {"type": ["array", "null"], "items": {"type": "string"}},
    "budget_usd": {"type": ["number", "null"], "minimum": 0},
}

SCHEMAS: JSON = {
    "Group": {
        "type": "object",
        "required": ["id", "name"],
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "rpm": {"type": ["integer", "null"]},
            "tpm": {"type": ["integer", "null"]},
            "models": {"type": ["array", "null"], "items": {"type": "string"}},
            "budget_usd": {"type": ["number", "null"]},
        },
    },
    "GroupChanges": {
        "type": "object",
        "description": "A field set to null clears that limit.",
        "properties": _GROUP_FIELDS,
    },
    "NewGroup": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string", "minLength": 1}, **_GROUP_FIELDS},
    },
    "Key": {
        "type": "object",
        "required": ["id", "group_id", "prefix", "created_at"],
        "properties": {
            "id": {"type": "integer"},
            "group_id": {"type": "integer"},
            "name": {"type": "string"},
            "prefix": {"type": "string"},
            "created_at": {"type": "string"},
            "expires_at": {"type": ["string", "null"]},
            "revoked_at": {"type": ["string", "null"]},
            "rpm": {"type": ["integer", "null"]},
            "tpm": {"type": ["integer", "null"]},
            "key": {"type": "string", "description": "Only when created: shown once."},
        },
    },
    "NewKey": {
        "type": "object",
        "required": ["group"],
        "properties": {
            "group": {"type": "string", "description": "An existing group's name."},
            "name": {"type": "string"},
            "expires_in_days": _LIMIT,
            "rpm": _LIMIT,
            "tpm": _LIMIT,
        },
    },
}


def _list_of(name: str) -> JSON:
    return {
        "type": "object",
        "required": ["object", "data"],
        "properties": {"object": {"const": "list"}, "data": {"type": "array", "items": ref(name)}},
    }


def _admin(operation_id: str, summary: str, responses: JSON, **more: object) -> JSON:
    return operation(operation_id, summary, responses, security="adminToken", **more)


PATHS: JSON = {
    "/admin/groups": {
        "get": _admin("listGroups", "Every group", json_reply("The groups", _list_of("Group"))),
        "post": _admin(
            "createGroup",
            "Create a group",
            json_reply("The group", ref("Group"), status="201"),
            requestBody=json_body(ref("NewGroup")),
        ),
    },
    "/admin/groups/{name}": {
        "patch": _admin(
            "updateGroup",
            "Change a group's limits, models or budget",
            json_reply("The group", ref("Group")),
            parameters=[
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            requestBody=json_body(ref("GroupChanges")),
        )
    },
    "/admin/keys": {
        "get": _admin(
            "listKeys",
            "Keys (never the secret), optionally of one group",
            json_reply("The keys", _list_of("Key")),
            parameters=[{"name": "group", "in": "query", "schema": {"type": "string"}}],
        ),
        "post": _admin(
            "createKey",
            "Issue a key to a group (the secret is in this reply only)",
            json_reply("The key", ref("Key"), status="201"),
            requestBody=json_body(ref("NewKey")),
        ),
    },
    "/admin/keys/{key_id}": {
        "delete": _admin(
            "revokeKey",
            "Revoke a key",
            json_reply("The revoked key", ref("Key")),
            parameters=[
                {"name": "key_id", "in": "path", "required": True, "schema": {"type": "integer"}}
            ],
        )
    },
}
