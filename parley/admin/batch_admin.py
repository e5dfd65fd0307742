"""Batches and files as the operator and a group's administrator see them: every group's
batches (OpenAI's and Anthropic's Message Batches alike) with their progress and what
their lines have cost so far, a batch cancelled, and the files groups have uploaded
(their metadata, never their bytes).

Shared by ``GET /admin/batches``, ``/admin/files`` and the dashboard's Batches page. A
group-admin's service (``group_scope.py``) narrows everything to its group: another
group's batch is not found. The cost so far is read from the request log, where each
line's call is recorded with its request id ``batch_req_…`` (``domain/batches.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from parley.admin.service import AdminService
from parley.api.batch_lane import BATCH_LANE
from parley.domain.batches import (
    CANCELLED,
    CANCELLING,
    IN_PROGRESS,
    VALIDATING,
    Batch,
    is_batch_id,
    is_message_batch_id,
    lines_prefix,
)
from parley.domain.files import StoredFile
from parley.domain.pricing import nanos_to_usd
from parley.errors import AlreadyExists, InvalidRequest, NotFound
from parley.pipeline.context import SERVICES

MAX_LISTED = 200
"""The most batches (or files) one list shows, newest first."""
STATUSES = (
    "validating",
    "failed",
    "in_progress",
    "finalizing",
    "completed",
    "expired",
    "cancelling",
    "cancelled",
)


@dataclass(frozen=True, slots=True)
class BatchState:
    """A batch, its group's name and what its lines have cost so far."""

    batch: Batch
    group: str | None
    cost_nanos: int
    billed_lines: int

    def view(self) -> dict[str, Any]:
        batch = self.batch
        done = batch.completed + batch.failed
        ended = batch.completed_at or batch.failed_at or batch.cancelled_at or batch.expired_at
        return {
            "object": "admin.batch",
            "id": batch.id,
            "kind": "messages" if is_message_batch_id(batch.id) else "openai",
            "group_id": batch.group_id,
            "group": self.group,
            "key_id": batch.key_id,
            "endpoint": batch.endpoint,
            "status": batch.status,
            "request_counts": {
                "total": batch.total,
                "completed": batch.completed,
                "failed": batch.failed,
            },
            "progress": round(done / batch.total, 4) if batch.total else 0.0,
            "cost_usd": nanos_to_usd(self.cost_nanos),
            "billed_lines": self.billed_lines,
            "created_at": batch.created_at.isoformat(),
            "expires_at": batch.expires_at.isoformat(),
            "completed_at": ended.isoformat() if ended is not None else None,
            "input_file_id": batch.input_file_id,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "cancellable": batch.status in (VALIDATING, IN_PROGRESS),
        }


def file_view(stored: StoredFile, group: str | None) -> dict[str, Any]:
    """A file's metadata: never its bytes."""
    return {
        "object": "admin.file",
        "id": stored.id,
        "group_id": stored.group_id,
        "group": group,
        "purpose": stored.purpose,
        "bytes": stored.bytes,
        "filename": stored.filename,
        "created_at": stored.created_at.isoformat(),
        "expires_at": stored.expires_at.isoformat() if stored.expires_at else None,
    }


def status_filter(params: MultiMapping[str]) -> str | None:
    status = params.get("status", "").strip()
    if not status:
        return None
    if status not in STATUSES:
        raise InvalidRequest(f"'status' must be one of {', '.join(STATUSES)}.", param="status")
    return status


async def _group_id(service: AdminService, name: str) -> int | None:
    """The group a ``group`` filter names (theirs alone for a group-admin)."""
    if name:
        return (await service.group(name)).id
    return service.scope.id if service.scope is not None else None


async def _names(service: AdminService) -> dict[int, str]:
    return {group.id: group.name for group in await service.groups()}


async def batches(
    request: web.Request, service: AdminService, group: str = "", status: str | None = None
) -> list[BatchState]:
    """The newest batches (of ``group``, in ``status``), with their cost so far."""
    store = request.config_dict[SERVICES].store
    found = await store.every_batch(
        await _group_id(service, group), status=status, limit=MAX_LISTED
    )
    names = await _names(service)
    return [await _state(service, batch, names) for batch in found]


async def _state(service: AdminService, batch: Batch, names: dict[int, str]) -> BatchState:
    cost, lines = await service.store.prefix_cost(
        lines_prefix(batch.id), batch.group_id, batch.created_at
    )
    return BatchState(batch, names.get(batch.group_id), cost, lines)


async def find_batch(request: web.Request, service: AdminService, batch_id: str) -> BatchState:
    """The batch, if the service may see it (another group's is not found)."""
    store = request.config_dict[SERVICES].store
    found = None
    if is_batch_id(batch_id) or is_message_batch_id(batch_id):
        scope = service.scope.id if service.scope is not None else None
        found = await store.find_batch(batch_id, scope)
    if found is None:
        raise NotFound(f"No batch '{batch_id}'.", param="batch_id")
    return await _state(service, found, await _names(service))


async def cancel(request: web.Request, service: AdminService, batch_id: str) -> BatchState:
    """Stop sending the batch's lines at once (the lane ends it ``cancelled`` once those
    in flight are done), audited as ``batch.cancel``. Cancelling a batch already
    cancelling or cancelled changes nothing; one that has ended is a 409."""
    state = await find_batch(request, service, batch_id)
    store = request.config_dict[SERVICES].store
    moved = await store.set_batch_status(batch_id, CANCELLING, only_from=(VALIDATING, IN_PROGRESS))
    if not moved and state.batch.status not in (CANCELLING, CANCELLED):
        raise AlreadyExists(
            f"Cannot cancel a batch with status '{state.batch.status}'.", param="batch_id"
        )
    if moved:
        await service.audit(
            "batch.cancel",
            batch_id,
            group=state.group,
            endpoint=state.batch.endpoint,
            done=state.batch.completed + state.batch.failed,
            total=state.batch.total,
        )
        lane = request.config_dict.get(BATCH_LANE)
        if lane is not None:
            lane.wake()
    return await find_batch(request, service, batch_id)


async def files(
    request: web.Request, service: AdminService, group: str = ""
) -> list[dict[str, Any]]:
    """The newest unexpired files (of ``group``), as ``file_view``s."""
    store = request.config_dict[SERVICES].store
    found = await store.every_file(await _group_id(service, group), limit=MAX_LISTED)
    names = await _names(service)
    return [file_view(stored, names.get(stored.group_id)) for stored in found]
