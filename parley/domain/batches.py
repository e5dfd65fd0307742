"""A batch (``/v1/batches``) and its lines, as the store keeps them.

A batch belongs to one group and runs with the key that created it. Each line of its
input file is a row with a state: ``queued`` (not sent), ``claimed`` (taken by one
instance's lane, not sent yet), ``sent`` (recorded before its call starts), then
``done`` or ``failed`` with its result (the output or error file's line), or
``cancelled`` or ``expired`` (never sent). A line ``sent`` by a lane that died may have
reached its upstream: it is never sent again, and goes to the error file as
``interrupted``; a line it had only ``claimed`` goes back to the queue.

Anthropic's Message Batches (``/v1/messages/batches``) are batches of the endpoint
``/v1/messages`` with ids ``msgbatch_...``: the same rows, run by the same lane.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/responses")
COMPLETION_WINDOW = "24h"
WINDOW_SECONDS = 24 * 3600
MESSAGES_ENDPOINT = "/v1/messages"
"""The endpoint of an Anthropic Message Batch's lines."""
BATCH_ID = re.compile(r"batch_[0-9a-f]{24}")
MESSAGE_BATCH_ID = re.compile(r"msgbatch_[0-9a-f]{24}")

VALIDATING = "validating"
FAILED = "failed"
IN_PROGRESS = "in_progress"
FINALIZING = "finalizing"
COMPLETED = "completed"
EXPIRED = "expired"
CANCELLING = "cancelling"
CANCELLED = "cancelled"
RUNNING = (IN_PROGRESS, CANCELLING, FINALIZING)
"""The statuses whose batch the lane still has work on."""
ENDED = (COMPLETED, FAILED, EXPIRED, CANCELLED)

QUEUED = "queued"
CLAIMED = "claimed"
SENT = "sent"
DONE = "done"
LINE_FAILED = "failed"
LINE_CANCELLED = "cancelled"
LINE_EXPIRED = "expired"
"""An Anthropic batch's line not run before its batch expired (an OpenAI batch's goes
to its error file, ``failed``)."""


def new_batch_id(prefix: str = "batch_") -> str:
    """``prefix`` (``batch_``, or ``msgbatch_`` for a Message Batch), the creation time
    in milliseconds (12 hex) and 12 random hex."""
    return f"{prefix}{int(time.time() * 1000):012x}{secrets.token_hex(6)}"


def is_batch_id(text: str) -> bool:
    return BATCH_ID.fullmatch(text) is not None


def is_message_batch_id(text: str) -> bool:
    return MESSAGE_BATCH_ID.fullmatch(text) is not None


def line_request_id(batch_id: str, line: int) -> str:
    """A line's request id, in its output line and the request log (``batch_req_``
    marks a batch line there): the batch's id and the line number."""
    return f"batch_req_{batch_id.removeprefix('batch_')}_{line}"


LINE_PREFIX = "batch_req_"
"""What every batch line's request id starts with (the request log's ``batch=true``)."""


def lines_prefix(batch_id: str) -> str:
    """What the request ids of every line of the batch start with, and no other's."""
    return line_request_id(batch_id, 0).removesuffix("0")


def batch_of(request_id: str) -> str | None:
    """The batch whose line made the call with this request id; None: not a batch's."""
    head, _, line = request_id.removeprefix(LINE_PREFIX).rpartition("_")
    if not request_id.startswith(LINE_PREFIX) or not line.isdecimal():
        return None
    batch_id = head if head.startswith("msgbatch_") else f"batch_{head}"
    return batch_id if is_batch_id(batch_id) or is_message_batch_id(batch_id) else None


@dataclass(frozen=True, slots=True)
class LineError:
    """A problem of the input file, on one line (``None``: the whole file)."""

    code: str
    message: str
    line: int | None = None
    param: str | None = None

    def as_object(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "param": self.param, "line": self.line}


@dataclass(frozen=True, slots=True)
class Batch:
    id: str
    group_id: int
    key_id: int
    endpoint: str
    input_file_id: str
    completion_window: str
    status: str
    created_at: datetime
    expires_at: datetime
    total: int = 0
    completed: int = 0
    failed: int = 0
    metadata: str | None = None
    errors: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    in_progress_at: datetime | None = None
    finalizing_at: datetime | None = None
    completed_at: datetime | None = None
    failed_at: datetime | None = None
    expired_at: datetime | None = None
    cancelling_at: datetime | None = None
    cancelled_at: datetime | None = None
    owner: str | None = None
    """The lane ending the batch, once one has taken it to write its results."""

    def as_object(self) -> dict[str, Any]:
        """OpenAI's batch object."""
        errors = None
        if self.errors is not None:
            errors = {"object": "list", "data": orjson.loads(self.errors)}
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": errors,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": _seconds(self.created_at),
            "in_progress_at": _seconds(self.in_progress_at),
            "expires_at": _seconds(self.expires_at),
            "finalizing_at": _seconds(self.finalizing_at),
            "completed_at": _seconds(self.completed_at),
            "failed_at": _seconds(self.failed_at),
            "expired_at": _seconds(self.expired_at),
            "cancelling_at": _seconds(self.cancelling_at),
            "cancelled_at": _seconds(self.cancelled_at),
            "request_counts": {
                "total": self.total,
                "completed": self.completed,
                "failed": self.failed,
            },
            "metadata": None if self.metadata is None else orjson.loads(self.metadata),
        }


@dataclass(frozen=True, slots=True)
class BatchLine:
    batch_id: str
    line: int
    custom_id: str
    body: str
    state: str = QUEUED
    result: str | None = None
    owner: str | None = None
    """The lane that took it (claimed or sent)."""


@dataclass(frozen=True, slots=True)
class BatchPage:
    batches: list[Batch]
    has_more: bool


def output_line(batch_id: str, line: int, custom_id: str, status: int, body: bytes | None) -> str:
    """A line of the output or error file: the reply's status and body."""
    request_id = line_request_id(batch_id, line)
    response = None
    if body is not None:
        response = {
            "status_code": status,
            "request_id": request_id,
            "body": orjson.Fragment(body),
        }
    return orjson.dumps(
        {"id": request_id, "custom_id": custom_id, "response": response, "error": None}
    ).decode()


def error_line(batch_id: str, line: int, custom_id: str, code: str, message: str) -> str:
    """A line of the error file for a line that has no reply: ``interrupted`` (it may
    have reached its upstream before a restart) or ``batch_expired``."""
    return orjson.dumps(
        {
            "id": line_request_id(batch_id, line),
            "custom_id": custom_id,
            "response": None,
            "error": {"code": code, "message": message},
        }
    ).decode()


def _seconds(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp())
