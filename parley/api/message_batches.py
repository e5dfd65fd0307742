"""Anthropic's Message Batches API, ``/v1/messages/batches``: create, list, retrieve,
cancel, results (JSONL) and delete, in Anthropic's shapes and error envelope.

A Message Batch is a batch of ``/v1/messages`` lines (``domain/batches.py``): the same
rows, run by the same lane (``api/batch_lane.py``) as OpenAI's batches, each request a
Messages call through the Messages dialect (admitted, routed, failed over, metered at the
model's batch price). Its requests come in the body rather than a file; they are all
checked before the batch is made, and the first problem is a 400 naming the request
(``requests.3.params: ...``). Each request's result is kept on its line in Anthropic's
shape (``api/batch_results.py``) and served, in request order, once the batch has
ended. A batch belongs to the caller's group: another group's id is a 404.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from aiohttp import web

from parley.api.batch_lane import BATCH_LANE
from parley.api.batches import LINES_PER_WRITE
from parley.api.body import read_json
from parley.api.files import page_limit
from parley.api.messages import MESSAGES
from parley.api.messages_request import parse_messages
from parley.domain.batches import (
    CANCELLING,
    CLAIMED,
    COMPLETION_WINDOW,
    DONE,
    ENDED,
    IN_PROGRESS,
    LINE_CANCELLED,
    LINE_EXPIRED,
    LINE_FAILED,
    MESSAGES_ENDPOINT,
    QUEUED,
    SENT,
    VALIDATING,
    WINDOW_SECONDS,
    Batch,
    BatchLine,
    is_message_batch_id,
    new_batch_id,
)
from parley.errors import InvalidRequest, NotFound, ParleyError
from parley.pipeline.admit import resolve_model, take_request
from parley.pipeline.authenticate import Caller
from parley.pipeline.context import REPLY_HEADERS, caller, services
from parley.pipeline.services import Services
from parley.pipeline.started import note_started

ID_PREFIX = "msgbatch_"
MAX_PAGE = 1000
DEFAULT_PAGE = 20
RESULTS_PAGE = 1000
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
PATH = "/v1/messages/batches"


async def create_message_batch(request: web.Request) -> web.StreamResponse:
    svc = await _counted(request)
    body = await read_json(request)
    who = caller(request)
    lines = _checked(body.get("requests"), who, svc)
    now = datetime.now(UTC)
    batch = Batch(
        id=new_batch_id(ID_PREFIX),
        group_id=who.group.id,
        key_id=who.key.id,
        endpoint=MESSAGES_ENDPOINT,
        input_file_id="",
        completion_window=COMPLETION_WINDOW,
        status=VALIDATING,
        created_at=now,
        expires_at=now + timedelta(seconds=WINDOW_SECONDS),
    )
    await svc.store.add_batch(batch)
    for first in range(0, len(lines), LINES_PER_WRITE):
        page = lines[first : first + LINES_PER_WRITE]
        await svc.store.add_batch_lines(
            [BatchLine(batch.id, number, custom_id, text) for number, custom_id, text in page]
        )
    await svc.store.set_batch_status(
        batch.id, IN_PROGRESS, only_from=(VALIDATING,), total=len(lines)
    )
    lane = request.app.get(BATCH_LANE)
    if lane is not None:
        lane.wake()
    return await _shown(request, svc, await _found(svc, batch.id, who.group.id))


async def list_message_batches(request: web.Request) -> web.StreamResponse:
    """The group's Message Batches, newest first: ``limit`` (1 to 1000, default 20),
    ``after_id`` (older than it) or ``before_id`` (newer than it)."""
    svc = await _counted(request)
    limit = page_limit(request.query.get("limit"), MAX_PAGE, DEFAULT_PAGE)
    cursors = {name: request.query.get(name) for name in ("after_id", "before_id")}
    for name, value in cursors.items():
        if value is not None and not is_message_batch_id(value):
            raise InvalidRequest(f"'{name}' must be a Message Batch id.", param=name)
    page = await svc.store.list_batches(
        caller(request).group.id,
        limit=limit,
        after=cursors["after_id"],
        before=cursors["before_id"],
        messages=True,
    )
    counts = await svc.store.batch_line_counts_of([batch.id for batch in page.batches])
    base = _base(request, svc)
    data = [message_batch(batch, counts[batch.id], base) for batch in page.batches]
    return _json(
        {
            "data": data,
            "has_more": page.has_more,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    )


async def retrieve_message_batch(request: web.Request) -> web.StreamResponse:
    svc = await _counted(request)
    found = await _found(svc, request.match_info["batch_id"], caller(request).group.id)
    return await _shown(request, svc, found)


async def cancel_message_batch(request: web.Request) -> web.StreamResponse:
    """Stop sending the batch's requests at once (``canceling``); the lane ends it once
    those in flight are done, the others ``canceled``. Cancelling an ended batch changes
    nothing."""
    svc = await _counted(request)
    group_id = caller(request).group.id
    batch = await _found(svc, request.match_info["batch_id"], group_id)
    await svc.store.set_batch_status(batch.id, CANCELLING, only_from=(VALIDATING, IN_PROGRESS))
    lane = request.app.get(BATCH_LANE)
    if lane is not None:
        lane.wake()
    return await _shown(request, svc, await _found(svc, batch.id, group_id))


async def delete_message_batch(request: web.Request) -> web.StreamResponse:
    """Delete an ended batch and its results; one still processing must be cancelled
    first."""
    svc = await _counted(request)
    group_id = caller(request).group.id
    batch = await _found(svc, request.match_info["batch_id"], group_id)
    if not await svc.store.delete_batch(batch.id, group_id):
        raise InvalidRequest(
            f"Message Batch {batch.id} is still processing; cancel it before deleting it."
        )
    return _json({"id": batch.id, "type": "message_batch_deleted"})


async def message_batch_results(request: web.Request) -> web.StreamResponse:
    """The batch's results as JSONL, one line a request, in request order (streamed
    from the database page by page)."""
    svc = await _counted(request)
    batch = await _found(svc, request.match_info["batch_id"], caller(request).group.id)
    if batch.status not in ENDED:
        raise InvalidRequest(
            f"Message Batch {batch.id} has not ended; its results are ready once "
            "'processing_status' is 'ended'."
        )
    response = web.StreamResponse(headers={"Content-Type": "application/x-jsonl"})
    note_started(request, response)
    await response.prepare(request)
    after = 0
    while page := await svc.store.all_batch_results(batch.id, after=after, most=RESULTS_PAGE):
        await response.write("".join(f"{result}\n" for _, result in page).encode())
        after = page[-1][0]
    await response.write_eof()
    return response


def message_batch(batch: Batch, counts: dict[str, int], base: str) -> dict[str, Any]:
    """Anthropic's ``message_batch`` object, from the batch and its lines' states."""
    ended = batch.status in ENDED
    status = "ended" if ended else "canceling" if batch.status == CANCELLING else "in_progress"
    ended_at = batch.completed_at or batch.cancelled_at or batch.expired_at or batch.failed_at
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": {
            "processing": sum(counts.get(state, 0) for state in (QUEUED, CLAIMED, SENT)),
            "succeeded": counts.get(DONE, 0),
            "errored": counts.get(LINE_FAILED, 0),
            "canceled": counts.get(LINE_CANCELLED, 0),
            "expired": counts.get(LINE_EXPIRED, 0),
        },
        "ended_at": _moment(ended_at if ended else None),
        "created_at": _moment(batch.created_at),
        "expires_at": _moment(batch.expires_at),
        "archived_at": None,
        "cancel_initiated_at": _moment(batch.cancelling_at),
        "results_url": f"{base}{PATH}/{batch.id}/results" if ended else None,
    }


def _checked(requests: Any, who: Caller, svc: Services) -> list[tuple[int, str, str]]:
    """Each request as ``(number from 1, custom_id, params as JSON text)``, once every
    one is a Messages call the caller may make (400 naming the first that is not)."""
    most = svc.settings.batches.max_lines
    if not isinstance(requests, list) or not requests:
        raise InvalidRequest("'requests' must be a non-empty array.", param="requests")
    if len(requests) > most:
        raise InvalidRequest(f"requests: a batch may hold at most {most} requests.")
    seen: set[str] = set()
    lines: list[tuple[int, str, str]] = []
    for index, item in enumerate(requests):
        where = f"requests.{index}"
        if not isinstance(item, dict):
            raise InvalidRequest(f"{where}: must be an object with 'custom_id' and 'params'.")
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or CUSTOM_ID.fullmatch(custom_id) is None:
            raise InvalidRequest(f"{where}.custom_id: must be 1 to 64 letters, digits, '_' or '-'.")
        if custom_id in seen:
            raise InvalidRequest(
                f"{where}.custom_id: '{custom_id}' is used by an earlier request; "
                "each custom_id must be unique within the batch."
            )
        seen.add(custom_id)
        params = item.get("params")
        if not isinstance(params, dict):
            raise InvalidRequest(f"{where}.params: must be an object.")
        text = orjson.dumps(params)
        try:
            _check_params(params, len(text), who, svc)
        except ParleyError as error:
            named = f".{error.param}" if error.param else ""
            raise InvalidRequest(
                f"{where}.params{named}: {error.message}", code=error.code
            ) from None
        lines.append((index + 1, custom_id, text.decode()))
    return lines


def _check_params(params: dict[str, Any], size: int, who: Caller, svc: Services) -> None:
    if params.get("stream"):
        raise InvalidRequest("A batch request cannot be streamed: leave out 'stream'.")
    checked = parse_messages(params, None, size)
    resolve_model(svc.models, who, checked.model, MESSAGES.kinds, MESSAGES.name)


async def _counted(request: web.Request) -> Services:
    """The services, once the call is counted against the caller's request rates."""
    svc = services(request)
    request[REPLY_HEADERS] = await take_request(svc.limiter, caller(request))
    return svc


async def _found(svc: Services, batch_id: str, group_id: int) -> Batch:
    found = None
    if is_message_batch_id(batch_id):
        found = await svc.store.find_batch(batch_id, group_id)
    if found is None or found.endpoint != MESSAGES_ENDPOINT:
        raise NotFound(f"No Message Batch with id {batch_id}.")
    return found


async def _shown(request: web.Request, svc: Services, batch: Batch) -> web.Response:
    counts = await svc.store.batch_line_counts(batch.id)
    return _json(message_batch(batch, counts, _base(request, svc)))


def _base(request: web.Request, svc: Services) -> str:
    """The gateway's address as the caller reaches it, for ``results_url``."""
    return (svc.settings.images.public_url or str(request.url.origin())).rstrip("/")


def _moment(moment: datetime | None) -> str | None:
    """RFC 3339, in UTC (``2024-08-20T18:37:24.100435Z``)."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _json(body: object) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")
