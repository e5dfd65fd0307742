"""The batches API: ``POST /v1/batches``, ``GET /v1/batches``, ``GET /v1/batches/{id}``
and ``POST /v1/batches/{id}/cancel``, in OpenAI's shapes.

A batch belongs to the caller's group and runs with the caller's key: another group's
id is a 404. Its input file is checked whole before the batch is accepted
(``api/batch_lines.py``): a file with problems makes a ``failed`` batch whose
``errors`` name each line, and no line of it is ever sent. An accepted batch is
``in_progress`` at once; the lane (``api/batch_lane.py``) runs its lines. Like the
files API, these calls count against the group's request rates and are not metered.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from aiohttp import web

from parley.api.batch_lane import BATCH_LANE
from parley.api.batch_lines import LineChecker, split_lines
from parley.api.body import read_json
from parley.api.files import missing_file, page_limit
from parley.domain.batches import (
    BATCH_ENDPOINTS,
    CANCELLING,
    COMPLETION_WINDOW,
    FAILED,
    IN_PROGRESS,
    QUEUED,
    VALIDATING,
    WINDOW_SECONDS,
    Batch,
    BatchLine,
    LineError,
    is_batch_id,
    new_batch_id,
)
from parley.domain.files import is_file_id
from parley.errors import AlreadyExists, InvalidRequest, NotFound
from parley.pipeline.admit import take_request
from parley.pipeline.context import REPLY_HEADERS, caller, services
from parley.pipeline.services import Services

MAX_PAGE = 100
DEFAULT_PAGE = 20
LINES_PER_WRITE = 500
MAX_METADATA_PAIRS = 16


async def create_batch(request: web.Request) -> web.StreamResponse:
    svc = await _counted(request)
    body = await read_json(request)
    endpoint = body.get("endpoint")
    if endpoint not in BATCH_ENDPOINTS:
        raise InvalidRequest(
            f"'endpoint' must be one of {', '.join(BATCH_ENDPOINTS)}.", param="endpoint"
        )
    if body.get("completion_window") != COMPLETION_WINDOW:
        raise InvalidRequest("'completion_window' must be '24h'.", param="completion_window")
    metadata = _metadata(body.get("metadata"))
    file_id = body.get("input_file_id")
    who = caller(request)
    if not isinstance(file_id, str):
        raise InvalidRequest("'input_file_id' must be a file id.", param="input_file_id")
    stored = await svc.store.find_file(file_id, who.group.id) if is_file_id(file_id) else None
    if stored is None:
        raise missing_file(file_id)
    if stored.purpose != "batch":
        raise InvalidRequest(
            "The input file must be uploaded with purpose 'batch'.", param="input_file_id"
        )
    now = datetime.now(UTC)
    batch = Batch(
        id=new_batch_id(),
        group_id=who.group.id,
        key_id=who.key.id,
        endpoint=endpoint,
        input_file_id=file_id,
        completion_window=COMPLETION_WINDOW,
        status=VALIDATING,
        created_at=now,
        expires_at=now + timedelta(seconds=WINDOW_SECONDS),
        metadata=None if metadata is None else orjson.dumps(metadata).decode(),
    )
    await svc.store.add_batch(batch)
    errors, total = await _read_lines(svc, batch, LineChecker(endpoint, who, svc))
    if errors:
        text = orjson.dumps([error.as_object() for error in errors]).decode()
        await svc.store.set_batch_status(
            batch.id, FAILED, only_from=(VALIDATING,), errors=text, total=0
        )
    else:
        await svc.store.set_batch_status(
            batch.id, IN_PROGRESS, only_from=(VALIDATING,), total=total
        )
        lane = request.app.get(BATCH_LANE)
        if lane is not None:
            lane.wake()
    return _json(await _found(svc, batch.id, who.group.id))


async def list_batches(request: web.Request) -> web.StreamResponse:
    """The group's batches, newest first: ``limit`` (1 to 100, default 20), ``after``."""
    svc = await _counted(request)
    limit = page_limit(request.query.get("limit"), MAX_PAGE, DEFAULT_PAGE)
    after = request.query.get("after")
    if after is not None and not is_batch_id(after):
        raise InvalidRequest("'after' must be a batch id.", param="after")
    page = await svc.store.list_batches(caller(request).group.id, limit=limit, after=after)
    data = [batch.as_object() for batch in page.batches]
    return _json(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": page.has_more,
        }
    )


async def retrieve_batch(request: web.Request) -> web.StreamResponse:
    svc = await _counted(request)
    return _json(await _found(svc, request.match_info["batch_id"], caller(request).group.id))


async def cancel_batch(request: web.Request) -> web.StreamResponse:
    """Stop sending the batch's lines at once; the lane ends it as ``cancelled`` once the
    lines in flight are done, with files of what was."""
    svc = await _counted(request)
    batch_id = request.match_info["batch_id"]
    group_id = caller(request).group.id
    batch = await _found_batch(svc, batch_id, group_id)
    moved = await svc.store.set_batch_status(
        batch_id, CANCELLING, only_from=(VALIDATING, IN_PROGRESS)
    )
    if not moved and batch.status not in (CANCELLING, "cancelled"):
        raise AlreadyExists(
            f"Cannot cancel a batch with status '{batch.status}'.", param="batch_id"
        )
    lane = request.app.get(BATCH_LANE)
    if lane is not None:
        lane.wake()
    return _json(await _found(svc, batch_id, group_id))


async def _read_lines(
    svc: Services, batch: Batch, checker: LineChecker
) -> tuple[list[LineError], int]:
    """Check the input file's lines, storing them while none has a problem; its
    problems (or none) and its number of lines."""
    most = svc.settings.batches.max_lines
    pending: list[BatchLine] = []
    total = 0
    errors = checker.errors
    async for number, raw in split_lines(svc.file_bytes.read(batch.input_file_id)):
        total += 1
        if total > most:
            errors.append(
                LineError("too_many_lines", f"The input file has more than {most} lines.", number)
            )
            break
        checked = checker.check(number, raw)
        if checked is None or errors:
            continue
        custom_id, text = checked
        pending.append(BatchLine(batch.id, number, custom_id, text, QUEUED))
        if len(pending) >= LINES_PER_WRITE:
            await svc.store.add_batch_lines(pending)
            pending = []
    if not errors and total == 0:
        errors.append(LineError("empty_file", "The input file has no lines."))
    if not errors:
        await svc.store.add_batch_lines(pending)
    return errors, total


def _metadata(value: Any) -> Mapping[str, str] | None:
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or len(value) > MAX_METADATA_PAIRS
        or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512
            for k, v in value.items()
        )
    ):
        raise InvalidRequest(
            "'metadata' must be an object of at most 16 string values (keys up to 64 "
            "characters, values up to 512).",
            param="metadata",
        )
    return value


async def _counted(request: web.Request) -> Services:
    svc = services(request)
    request[REPLY_HEADERS] = await take_request(svc.limiter, caller(request))
    return svc


async def _found_batch(svc: Services, batch_id: str, group_id: int) -> Batch:
    found = await svc.store.find_batch(batch_id, group_id) if is_batch_id(batch_id) else None
    if found is None:
        raise NotFound(f"No such Batch object: {batch_id}", param="batch_id")
    return found


async def _found(svc: Services, batch_id: str, group_id: int) -> dict[str, Any]:
    return (await _found_batch(svc, batch_id, group_id)).as_object()


def _json(body: object) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")
