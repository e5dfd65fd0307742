"""The admin JSON API's groups, keys, usage, request log, overview, audit log and voices
(``parley.admin.api``, ``docs/admin-api.md``); channels are in ``admin_channels``, one
key, administrator accounts and the voice roster in ``admin_keys``. The dashboard's pages
(``/admin/``, ``/admin/ui/…``) are HTML, not described."""

from __future__ import annotations

from typing import Any

from parley.domain.wire import JSON
from parley.openapi.components import (
    ERROR_REPLY,
    admin_operation,
    json_body,
    json_reply,
    list_of,
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

_CONTENT_FIELDS: JSON = {
    "content_policy": {
        "enum": ["off", "metadata", "redacted", "full"],
        "description": "What is kept of the group's prompts and replies.",
    },
    "content_retention_days": {"type": "integer", "minimum": 1, "maximum": 3650},
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
            **_CONTENT_FIELDS,
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
                    "state": {"enum": ["over", "near", "ok", "none"]},
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
            "spend": {
                "type": "object",
                "description": "The top spending groups and keys this budget period, and "
                "the groups nearest their budget: budget views with kind and name.",
                "properties": {
                    "top_groups": {"type": "array", "items": {"type": "object"}},
                    "top_keys": {"type": "array", "items": {"type": "object"}},
                    "nearest_budget": {"type": "array", "items": {"type": "object"}},
                },
            },
        },
    },
    "LoggedRequest": {
        "type": "object",
        "required": ["object", "request_id", "created_at", "status", "admitted"],
        "properties": {
            "object": {"const": "request"},
            "request_id": {"type": "string"},
            "batch_id": {
                "type": ["string", "null"],
                "description": "The batch whose line made the call; null: not a batch's",
            },
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
            "error_detail": {
                "type": ["string", "null"],
                "description": "Why it failed: the upstream's status and redacted message, "
                "or what the caller was told.",
            },
            "admitted": {"type": "boolean"},
            "requests": {"type": "integer", "minimum": 1},
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
    "VoiceDeletion": {
        "type": "object",
        "description": "A clone's deletion its engine has not done yet, retried with backoff.",
        "required": ["object", "id", "voice_id", "model", "group_id", "attempts"],
        "properties": {
            "object": {"const": "audio.voice.deletion"},
            "id": {"type": "integer"},
            "voice_id": {"type": "string"},
            "model": {"type": "string"},
            "group_id": {"type": "integer"},
            "group": {"type": ["string", "null"]},
            "label": {"type": "string"},
            "engine_name": {"type": "string"},
            "channel": {"type": "string"},
            "requested_at": {"type": ["string", "null"]},
            "attempts": {"type": "integer"},
            "last_error": {"type": ["string", "null"], "description": "Redacted."},
            "last_attempt_at": {"type": ["string", "null"]},
            "next_attempt_at": {"type": ["string", "null"]},
            "deleted": {"type": "boolean", "description": "Only in a retry's reply."},
            "abandoned": {"type": "boolean", "description": "Only in a give-up's reply."},
        },
    },
    "GroupChanges": {
        "type": "object",
        "description": "A field set to null clears that limit.",
        "properties": {**_GROUP_FIELDS, **_CONTENT_FIELDS},
    },
    "NewGroup": {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1},
            **_GROUP_FIELDS,
            **_CONTENT_FIELDS,
        },
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
            "models": {"type": ["array", "null"], "items": {"type": "string"}},
            "budget_usd": {"type": ["number", "null"]},
            "former_prefixes": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Prefixes of the secrets rotations replaced, newest first.",
            },
            "previous_secret_valid_until": {
                "type": ["string", "null"],
                "description": "Until when a rotated key's old secret still works.",
            },
            "key": {
                "type": "string",
                "description": "Only when created or rotated: shown once.",
            },
        },
    },
    "NewKey": {
        "type": "object",
        "required": ["group"],
        "properties": {
            "group": {"type": "string", "description": "An existing group's name."},
            "name": {"type": "string"},
            "expires_in_days": _LIMIT,
            **_GROUP_FIELDS,
        },
    },
}


def _on_group(
    operation_id: str, summary: str, schema: str = "Group", role: str = "operator", **more: Any
) -> JSON:
    """An operation on the group named in the path, answering with that group."""
    reply = json_reply("The group", ref(schema))
    return admin_operation(
        operation_id, summary, reply, role=role, parameters=[path_param("name")], **more
    )


_LIMIT_QUERY: JSON = {"type": "integer", "minimum": 1}


PATHS: JSON = {
    "/admin/groups": {
        "get": admin_operation(
            "listGroups", "Every group", json_reply("The groups", list_of("Group"))
        ),
        "post": admin_operation(
            "createGroup",
            "Create a group",
            json_reply("The group", ref("Group"), status="201"),
            requestBody=json_body(ref("NewGroup")),
            role="operator",
        ),
    },
    "/admin/groups/{name}": {
        "get": _on_group(
            "getGroup", "One group, with its budget and spend this period", "GroupDetail", "viewer"
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
        "get": admin_operation(
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
                    "since",
                    description="First day, YYYY-MM-DD (default: the 1st of this month)",
                ),
                query_param("until", description="Last day, included (default: today)"),
                query_param("group", description="One group's name"),
                query_param("model", description="One public model name"),
                query_param(
                    "by",
                    description="Dimensions of the rows: day, group, model (comma-separated)",
                ),
                query_param("format", {"enum": ["json", "csv"]}),
            ],
        )
    },
    "/admin/requests": {
        "get": admin_operation(
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
                query_param("batch", description="true: batch lines alone; a batch's id: its"),
                query_param("limit", {"type": "integer", "minimum": 1, "maximum": 500}),
                query_param("cursor", description="next_cursor of the previous page"),
                query_param("format", {"enum": ["json", "csv"]}),
            ],
        )
    },
    "/admin/requests/{request_id}": {
        "get": admin_operation(
            "getLoggedRequest",
            "One line of the request log, by its x-request-id",
            json_reply("The line", ref("LoggedRequest")),
            parameters=[path_param("request_id")],
        )
    },
    "/admin/requests/{request_id}/content": {
        "get": admin_operation(
            "getRequestContent",
            "One call's kept content (its group's content policy), unsealed",
            json_reply("The call's content", {"type": "object"}),
            role="operator",
            description="Every view is written to the audit log (content.view) first.",
            parameters=[path_param("request_id")],
        )
    },
    "/admin/overview": {
        "get": admin_operation(
            "overview",
            "Today and the last 30 days",
            json_reply("The overview", ref("Overview")),
        )
    },
    "/admin/audit": {
        "get": admin_operation(
            "auditLog",
            "Admin changes, newest first",
            json_reply("The entries", list_of("AuditEntry")),
            parameters=[
                query_param("limit", _LIMIT_QUERY),
                query_param("before", _LIMIT_QUERY),
            ],
        )
    },
    "/admin/keys": {
        "get": admin_operation(
            "listKeys",
            "Keys (never the secret), optionally of one group",
            json_reply("The keys", list_of("Key")),
            parameters=[query_param("group")],
        ),
        "post": admin_operation(
            "createKey",
            "Issue a key to a group (the secret is in this reply only)",
            json_reply("The key", ref("Key"), status="201"),
            requestBody=json_body(ref("NewKey")),
            role="operator",
        ),
    },
    "/admin/voices": {
        "get": admin_operation(
            "listVoices",
            "Every group's cloned voices, oldest first",
            json_reply("The clones", list_of("AdminVoice")),
            parameters=[
                query_param("group", description="One group's name"),
                query_param("model", description="One model's name"),
            ],
        )
    },
    "/admin/voice-deletions": {
        "get": admin_operation(
            "listVoiceDeletions",
            "Clone deletions their engines have not done yet",
            json_reply("The pending deletions", list_of("VoiceDeletion")),
            parameters=[
                query_param("group", description="One group's name"),
                query_param("model", description="One model's name"),
            ],
        )
    },
    "/admin/voice-deletions/{deletion_id}/retry": {
        "post": admin_operation(
            "retryVoiceDeletion",
            "Try a pending clone deletion on its engine now (audited)",
            json_reply("The deletion after the attempt", ref("VoiceDeletion")),
            parameters=[path_param("deletion_id", "integer")],
            role="operator",
        )
    },
    "/admin/voice-deletions/{deletion_id}": {
        "delete": admin_operation(
            "abandonVoiceDeletion",
            "Give up a pending clone deletion (audited; the engine keeps the voice)",
            json_reply("The deletion given up", ref("VoiceDeletion")),
            parameters=[path_param("deletion_id", "integer")],
            role="operator",
        )
    },
    "/admin/voices/{model}/{voice_id}": {
        "delete": admin_operation(
            "deleteVoice",
            "Delete a clone on its engine, then in the registry",
            json_reply("The deleted clone", ref("AdminVoice")),
            parameters=[path_param("model"), path_param("voice_id")],
            role="operator",
        )
    },
}
