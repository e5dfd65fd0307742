"""/v1/files, /v1/batches and /v1/messages/batches (``parley.api.files``,
``parley.api.batches``, ``parley.api.message_batches``)."""

from __future__ import annotations

from parley.domain.batches import BATCH_ENDPOINTS
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
from parley.openapi.messages import ANTHROPIC_ERROR_REPLY

_WHEN: JSON = {"type": ["integer", "null"]}
_TEXT_OR_NULL: JSON = {"type": ["string", "null"]}
_MOMENT_OR_NULL: JSON = {"type": ["string", "null"], "format": "date-time"}


def _page(name: str) -> JSON:
    return {
        "type": "object",
        "required": ["object", "data", "has_more"],
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": ref(name)},
            "first_id": _TEXT_OR_NULL,
            "last_id": _TEXT_OR_NULL,
            "has_more": {"type": "boolean"},
        },
    }


SCHEMAS: JSON = {
    "File": {
        "type": "object",
        "required": ["id", "object", "bytes", "created_at", "filename", "purpose"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "file"},
            "bytes": {"type": "integer"},
            "created_at": {"type": "integer"},
            "filename": {"type": "string"},
            "purpose": {"type": "string"},
            "status": {"type": "string"},
            "expires_at": _WHEN,
        },
    },
    "FileDeleted": {
        "type": "object",
        "required": ["id", "object", "deleted"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "file"},
            "deleted": {"const": True},
        },
    },
    "FileList": _page("File"),
    "BatchRequest": {
        "type": "object",
        "required": ["input_file_id", "endpoint", "completion_window"],
        "properties": {
            "input_file_id": {"type": "string"},
            "endpoint": {"type": "string", "enum": list(BATCH_ENDPOINTS)},
            "completion_window": {"const": "24h"},
            "metadata": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
        },
    },
    "Batch": {
        "type": "object",
        "required": ["id", "object", "endpoint", "input_file_id", "status", "request_counts"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "batch"},
            "endpoint": {"type": "string"},
            "input_file_id": {"type": "string"},
            "completion_window": {"type": "string"},
            "status": {
                "type": "string",
                "enum": [
                    "validating",
                    "failed",
                    "in_progress",
                    "finalizing",
                    "completed",
                    "expired",
                    "cancelling",
                    "cancelled",
                ],
            },
            "output_file_id": _TEXT_OR_NULL,
            "error_file_id": _TEXT_OR_NULL,
            "created_at": {"type": "integer"},
            "expires_at": _WHEN,
            "request_counts": {
                "type": "object",
                "properties": {
                    "total": {"type": "integer"},
                    "completed": {"type": "integer"},
                    "failed": {"type": "integer"},
                },
            },
        },
    },
    "BatchList": _page("Batch"),
    "MessageBatchRequest": {
        "type": "object",
        "required": ["requests"],
        "properties": {
            "requests": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["custom_id", "params"],
                    "properties": {
                        "custom_id": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                        "params": {"type": "object", "description": "A Messages request body"},
                    },
                },
            }
        },
    },
    "MessageBatch": {
        "type": "object",
        "required": ["id", "type", "processing_status", "request_counts", "created_at"],
        "properties": {
            "id": {"type": "string"},
            "type": {"const": "message_batch"},
            "processing_status": {"type": "string", "enum": ["in_progress", "canceling", "ended"]},
            "request_counts": {
                "type": "object",
                "properties": {
                    name: {"type": "integer"}
                    for name in ("processing", "succeeded", "errored", "canceled", "expired")
                },
            },
            "created_at": {"type": "string", "format": "date-time"},
            "expires_at": {"type": "string", "format": "date-time"},
            "ended_at": _MOMENT_OR_NULL,
            "cancel_initiated_at": _MOMENT_OR_NULL,
            "archived_at": _MOMENT_OR_NULL,
            "results_url": _TEXT_OR_NULL,
        },
    },
    "MessageBatchList": {
        "type": "object",
        "required": ["data", "has_more"],
        "properties": {
            "data": {"type": "array", "items": ref("MessageBatch")},
            "first_id": _TEXT_OR_NULL,
            "last_id": _TEXT_OR_NULL,
            "has_more": {"type": "boolean"},
        },
    },
    "MessageBatchDeleted": {
        "type": "object",
        "required": ["id", "type"],
        "properties": {"id": {"type": "string"}, "type": {"const": "message_batch_deleted"}},
    },
}


def _anthropic(description: str, schema: JSON) -> JSON:
    """Responses of the Message Batches API: errors in Anthropic's shape."""
    return {**json_reply(description, schema), "default": ANTHROPIC_ERROR_REPLY}


_FILE_ID = path_param("file_id")
_BATCH_ID = path_param("batch_id")
_LIMIT = query_param("limit", {"type": "integer", "minimum": 1})
_AFTER = query_param("after")

PATHS: JSON = {
    "/v1/files": {
        "post": operation(
            "createFile",
            "Upload a file (purpose `batch` or `user_data`), private to the group",
            json_reply("The file", ref("File")),
            requestBody={
                "required": True,
                "content": {
                    "multipart/form-data": {
                        "schema": {
                            "type": "object",
                            "required": ["file", "purpose"],
                            "properties": {
                                "file": {"type": "string", "format": "binary"},
                                "purpose": {"type": "string", "enum": ["batch", "user_data"]},
                            },
                        }
                    }
                },
            },
        ),
        "get": operation(
            "listFiles",
            "The group's files, newest first",
            json_reply("A page of files", ref("FileList")),
            parameters=[
                _LIMIT,
                _AFTER,
                query_param("order", {"type": "string", "enum": ["asc", "desc"]}),
                query_param("purpose"),
            ],
        ),
    },
    "/v1/files/{file_id}": {
        "get": operation(
            "retrieveFile",
            "One of the group's files",
            json_reply("The file", ref("File")),
            parameters=[_FILE_ID],
        ),
        "delete": operation(
            "deleteFile",
            "Delete one of the group's files",
            json_reply("The deleted file", ref("FileDeleted")),
            parameters=[_FILE_ID],
        ),
    },
    "/v1/files/{file_id}/content": {
        "get": operation(
            "downloadFile",
            "The file's bytes",
            {
                "200": {
                    "description": "The bytes",
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        }
                    },
                },
                "default": ERROR_REPLY,
            },
            parameters=[_FILE_ID],
        )
    },
    "/v1/batches": {
        "post": operation(
            "createBatch",
            "Run a file of requests at the batch price (docs/batch.md)",
            json_reply("The batch", ref("Batch")),
            requestBody=json_body(ref("BatchRequest")),
        ),
        "get": operation(
            "listBatches",
            "The group's batches, newest first",
            json_reply("A page of batches", ref("BatchList")),
            parameters=[_LIMIT, _AFTER],
        ),
    },
    "/v1/batches/{batch_id}": {
        "get": operation(
            "retrieveBatch",
            "One of the group's batches",
            json_reply("The batch", ref("Batch")),
            parameters=[_BATCH_ID],
        )
    },
    "/v1/batches/{batch_id}/cancel": {
        "post": operation(
            "cancelBatch",
            "Stop sending the batch's lines",
            json_reply("The batch", ref("Batch")),
            parameters=[_BATCH_ID],
        )
    },
    "/v1/messages/batches": {
        "post": operation(
            "createMessageBatch",
            "Anthropic's Message Batches: run Messages requests at the batch price",
            _anthropic("The Message Batch", ref("MessageBatch")),
            requestBody=json_body(ref("MessageBatchRequest")),
        ),
        "get": operation(
            "listMessageBatches",
            "The group's Message Batches, newest first",
            _anthropic("A page of Message Batches", ref("MessageBatchList")),
            parameters=[_LIMIT, query_param("after_id"), query_param("before_id")],
        ),
    },
    "/v1/messages/batches/{batch_id}": {
        "get": operation(
            "retrieveMessageBatch",
            "One of the group's Message Batches",
            _anthropic("The Message Batch", ref("MessageBatch")),
            parameters=[_BATCH_ID],
        ),
        "delete": operation(
            "deleteMessageBatch",
            "Delete an ended Message Batch and its results",
            _anthropic("The deleted batch", ref("MessageBatchDeleted")),
            parameters=[_BATCH_ID],
        ),
    },
    "/v1/messages/batches/{batch_id}/cancel": {
        "post": operation(
            "cancelMessageBatch",
            "Stop sending the Message Batch's requests",
            _anthropic("The Message Batch", ref("MessageBatch")),
            parameters=[_BATCH_ID],
        )
    },
    "/v1/messages/batches/{batch_id}/results": {
        "get": operation(
            "messageBatchResults",
            "An ended Message Batch's results, one JSON line a request",
            {
                "200": {
                    "description": "The results",
                    "content": {"application/x-jsonl": {"schema": {"type": "string"}}},
                },
                "default": ANTHROPIC_ERROR_REPLY,
            },
            parameters=[_BATCH_ID],
        )
    },
}
