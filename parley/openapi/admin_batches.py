"""The admin JSON API's batches and files (``parley.admin.batch_admin``): every group's
batches with their progress and cost so far, one cancelled, and the groups' files (their
metadata alone), as ``docs/admin-api.md`` states them."""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.openapi.components import (
    admin_operation,
    json_reply,
    list_of,
    path_param,
    query_param,
    ref,
)

_WHEN = {"type": ["string", "null"]}
_ID = {"type": ["string", "null"]}
_STATUSES = [
    "validating",
    "failed",
    "in_progress",
    "finalizing",
    "completed",
    "expired",
    "cancelling",
    "cancelled",
]

SCHEMAS: JSON = {
    "AdminBatch": {
        "type": "object",
        "required": ["object", "id", "group_id", "endpoint", "status", "request_counts"],
        "properties": {
            "object": {"const": "admin.batch"},
            "id": {"type": "string"},
            "kind": {
                "enum": ["openai", "messages"],
                "description": "/v1/batches (openai) or /v1/messages/batches (messages)",
            },
            "group_id": {"type": "integer"},
            "group": {"type": ["string", "null"]},
            "key_id": {"type": "integer"},
            "endpoint": {"type": "string"},
            "status": {"enum": _STATUSES},
            "request_counts": {
                "type": "object",
                "properties": {
                    "total": {"type": "integer"},
                    "completed": {"type": "integer"},
                    "failed": {"type": "integer"},
                },
            },
            "progress": {"type": "number", "minimum": 0, "maximum": 1},
            "cost_usd": {
                "type": "number",
                "description": "What the request log holds for the batch's lines so far",
            },
            "billed_lines": {
                "type": "integer",
                "description": "The batch's lines in the request log so far",
            },
            "created_at": {"type": "string"},
            "expires_at": {"type": "string"},
            "completed_at": {**_WHEN, "description": "When it ended, whichever way"},
            "input_file_id": {"type": "string"},
            "output_file_id": _ID,
            "error_file_id": _ID,
            "cancellable": {"type": "boolean"},
        },
    },
    "AdminFile": {
        "type": "object",
        "required": ["object", "id", "group_id", "purpose", "bytes", "filename"],
        "properties": {
            "object": {"const": "admin.file"},
            "id": {"type": "string"},
            "group_id": {"type": "integer"},
            "group": {"type": ["string", "null"]},
            "purpose": {"type": "string"},
            "bytes": {"type": "integer"},
            "filename": {"type": "string"},
            "created_at": {"type": "string"},
            "expires_at": _WHEN,
        },
    },
}

PATHS: JSON = {
    "/admin/batches": {
        "get": admin_operation(
            "listBatches",
            "The newest batches (200 at most), with progress and cost so far",
            json_reply("The batches", list_of("AdminBatch")),
            parameters=[
                query_param("group", description="One group's name"),
                query_param("status", {"enum": _STATUSES}),
            ],
        )
    },
    "/admin/batches/{batch_id}": {
        "get": admin_operation(
            "getBatch",
            "One batch, with progress and cost so far",
            json_reply("The batch", ref("AdminBatch")),
            parameters=[path_param("batch_id")],
        )
    },
    "/admin/batches/{batch_id}/cancel": {
        "post": admin_operation(
            "cancelBatch",
            "Cancel a batch: no more of its lines is sent",
            json_reply("The batch, cancelling", ref("AdminBatch")),
            role="operator",
            description="Written to the audit log as batch.cancel. A batch that has "
            "ended is a 409.",
            parameters=[path_param("batch_id")],
        )
    },
    "/admin/files": {
        "get": admin_operation(
            "listFiles",
            "The newest files (200 at most): metadata, never content",
            json_reply("The files", list_of("AdminFile")),
            parameters=[query_param("group", description="One group's name")],
        )
    },
}
