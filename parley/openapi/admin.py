"""The admin JSON API (``parley.admin.api``, ``docs/admin-api.md``), with the operator's
admin token. The dashboard's pages (``/admin/``, ``/admin/ui/…``) are HTML, not described.
A key's own routes, channels and administrator accounts are in ``admin_live.py``."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import (
    ERROR_REPLY,
    json_body,
    json_reply,
    operation,
    path_param,
    query_param,
    ref,
)

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
            "disabled": {"type": "boolean"},
            "disabled_at": {"type": ["string", "null"]},
            "created_at": {"type": ["string", "null"]},
        },
    },
    "GroupDetail": {
        "allOf": [ref("Group")],
        "type": "object",
        "required": ["budget"],
        "properties": {
            "budget": {
                "type": "object",
                "properties": {
                    "period": {"enum": ["month", "day"]},
                    "period_start": {"type": "string"},
                    "period_end": {"type": "string"},
                    "limit_usd": {"type": ["number", "null"]},
                    "spent_usd": {"type": "number"},
                    "remaining_usd": {"type": ["number", "null"]},
                },
            }
        },
    },
    "AdminUsageReport": {
        "type": "object",
        "required": ["object", "since", "until", "by", "data", "total"],
        "properties": {
            "object": {"const": "usage_report"},
            "since": {"type": "string"},
            "until": {"type": "string"},
            "group": {"type": ["string", "null"]},
            "model": {"type": ["string", "null"]},
            "by": {"type": "array", "items": {"enum": ["day", "group", "model"]}},
            "data": {"type": "array", "items": {"type": "object"}},
            "total": {"type": "object"},
        },
    },
    "Overview": {
        "type": "object",
        "required": ["object", "today", "last_30_days", "days", "groups", "active_keys"],
        "properties": {
            "object": {"const": "overview"},
            "today": {"type": "object"},
            "last_30_days": {"type": "object"},
            "days": {"type": "array", "items": {"type": "object"}},
            "groups": {"type": "integer"},
            "active_keys": {"type": "integer"},
        },
    },
    "LoggedRequest": {
        "type": "object",
        "required": ["object", "request_id", "created_at", "status", "admitted"],
        "properties": {
            "object": {"const": "request"},
            "request_id": {"type": "string"},
            "created_at": {"type": "string"},
            "group_id": {"type": "integer"},
            "group": {"type": ["string", "null"]},
            "key": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "name": {"type": ["string", "null"]},
                    "prefix": {"type": ["string", "null"]},
                },
            },
            "endpoint": {"type": "string"},
            "dialect": {"type": "string"},
            "model_requested": {"type": ["string", "null"]},
            "model": {"type": ["string", "null"]},
            "channel": {"type": ["string", "null"]},
            "status": {"type": "integer"},
            "error_code": {"type": ["string", "null"]},
            "admitted": {"type": "boolean"},
            "latency_ms": {"type": "integer"},
            "first_byte_ms": {"type": ["integer", "null"]},
            "prompt_tokens": {"type": "integer"},
            "completion_tokens": {"type": "integer"},
            "total_tokens": {"type": "integer"},
            "characters": {"type": "integer"},
            "audio_seconds": {"type": "number"},
            "cost_usd": {"type": "number"},
            "estimated": {"type": "boolean"},
        },
    },
    "RequestLogPage": {
        "type": "object",
        "required": ["object", "data", "has_more", "next_cursor"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": ref("LoggedRequest")},
            "has_more": {"type": "boolean"},
            "next_cursor": {"type": ["string", "null"]},
        },
    },
    "Channel": {
        "type": "object",
        "required": ["name", "type", "base_url", "has_api_key", "models", "health"],
        "properties": {
            "name": {"type": "string"},
            "type": {"type": "string"},
            "base_url": {"type": "string"},
            "has_api_key": {"type": "boolean"},
            "models": {"type": "array", "items": {"type": "object"}},
            "priority": {"type": "integer"},
            "weight": {"type": "integer"},
            "timeouts": {"type": "object"},
            "health": {"type": "object"},
            "circuit": {"type": "null"},
        },
    },
    "AuditEntry": {
        "type": "object",
        "required": ["id", "created_at", "actor", "address", "action", "target", "detail"],
        "properties": {
            "id": {"type": "integer"},
            "created_at": {"type": "string"},
            "actor": {"type": "string"},
            "address": {"type": "string"},
            "action": {"type": "string"},
            "target": {"type": "string"},
            "detail": {"type": "object"},
        },
    },
    "AdminVoice": {
        "type": "object",
        "required": ["object", "id", "model", "group_id", "label", "created_at"],
        "properties": {
            "object": {"const": "audio.voice"},
            "id": {"type": "string"},
            "model": {"type": "string"},
            "group_id": {"type": "integer"},
            "group": {"type": ["string", "null"]},
            "label": {"type": "string"},
            "engine_name": {"type": "string"},
            "channel": {"type": "string"},
            "duration_seconds": {"type": "number"},
            "consent": {"type": ["string", "null"]},
            "created_at": {"type": ["string", "null"]},
            "deleted": {"type": "boolean", "description": "Only in a deletion's reply."},
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
            "group": {"type": ["string", "null"]},
            "status": {"enum": ["active", "revoked", "expired", "group_disabled"]},
            "last_used_at": {"type": ["string", "null"]},
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


def _on_group(operation_id: str, summary: str, schema: str = "Group", **more: object) -> JSON:
    """An operation on the group named in the path, answering with that group."""
    reply = json_reply("The group", ref(schema))
    return _admin(operation_id, summary, reply, parameters=[path_param("name")], **more)


_LIMIT_QUERY: JSON = {"type": "integer", "minimum": 1}


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
        "get": _on_group(
            "getGroup", "One group, with its budget and spend this period", "GroupDetail"
        ),
        "patch": _on_group(
            "updateGroup",
            "Change a group's limits, models or budget",
            requestBody=json_body(ref("GroupChanges")),
        ),
    },
    "/admin/groups/{name}/disable": {
        "post": _on_group(
            "disableGroup", "Refuse the group's keys (403 group_disabled) until it is enabled"
        )
    },
    "/admin/groups/{name}/enable": {
        "post": _on_group("enableGroup", "Accept a disabled group's keys again")
    },
    "/admin/usage": {
        "get": _admin(
            "usageReport",
            "Usage across groups from the daily rollups (JSON or CSV)",
            {
                "200": {
                    "description": "The report",
                    "content": {
                        "application/json": {"schema": ref("AdminUsageReport")},
                        "text/csv": {"schema": {"type": "string"}},
                    },
                },
                "default": ERROR_REPLY,
            },
            parameters=[
                query_param(
                    "since", description="First day, YYYY-MM-DD (default: the 1st of this month)"
                ),
                query_param("until", description="Last day, included (default: today)"),
                query_param("group", description="One group's name"),
                query_param("model", description="One public model name"),
                query_param(
                    "by", description="Dimensions of the rows: day, group, model (comma-separated)"
                ),
                query_param("format", {"enum": ["json", "csv"]}),
            ],
        )
    },
    "/admin/requests": {
        "get": _admin(
            "requestLog",
            "Calls with a known key, admitted or refused, newest first (JSON pages or CSV)",
            {
                "200": {
                    "description": "One page of lines, or every matching line as CSV",
                    "content": {
                        "application/json": {"schema": ref("RequestLogPage")},
                        "text/csv": {"schema": {"type": "string"}},
                    },
                },
                "default": ERROR_REPLY,
            },
            parameters=[
                query_param("group", description="One group's name"),
                query_param("key", description="One key's id"),
                query_param("model", description="The model that answered or the name asked"),
                query_param("status", description="A class (2xx, 3xx, 4xx, 5xx) or a code"),
                query_param("since", description="A date or an ISO 8601 time (included)"),
                query_param("until", description="A date (included) or an ISO 8601 time"),
                query_param("limit", {"type": "integer", "minimum": 1, "maximum": 500}),
                query_param("cursor", description="next_cursor of the previous page"),
                query_param("format", {"enum": ["json", "csv"]}),
            ],
        )
    },
    "/admin/requests/{request_id}": {
        "get": _admin(
            "getLoggedRequest",
            "One line of the request log, by its x-request-id",
            json_reply("The line", ref("LoggedRequest")),
            parameters=[path_param("request_id")],
        )
    },
    "/admin/overview": {
        "get": _admin(
            "overview", "Today and the last 30 days", json_reply("The overview", ref("Overview"))
        )
    },
    "/admin/audit": {
        "get": _admin(
            "auditLog",
            "Admin changes, newest first",
            json_reply("The entries", _list_of("AuditEntry")),
            parameters=[
                query_param("limit", _LIMIT_QUERY),
                query_param("before", _LIMIT_QUERY),
            ],
        )
    },
    "/admin/keys": {
        "get": _admin(
            "listKeys",
            "Keys (never the secret), optionally of one group",
            json_reply("The keys", _list_of("Key")),
            parameters=[query_param("group")],
        ),
        "post": _admin(
            "createKey",
            "Issue a key to a group (the secret is in this reply only)",
            json_reply("The key", ref("Key"), status="201"),
            requestBody=json_body(ref("NewKey")),
        ),
    },
    "/admin/voices": {
        "get": _admin(
            "listVoices",
            "Every group's cloned voices, oldest first",
            json_reply("The clones", _list_of("AdminVoice")),
            parameters=[
                query_param("group", description="One group's name"),
                query_param("model", description="One model's name"),
            ],
        )
    },
    "/admin/voices/{model}/{voice_id}": {
        "delete": _admin(
            "deleteVoice",
            "Delete a clone on its engine, then in the registry",
            json_reply("The deleted clone", ref("AdminVoice")),
            parameters=[path_param("model"), path_param("voice_id")],
        )
    },
}
