"""GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items.

A stored response (``POST /v1/responses`` with ``store``) belongs to the caller's
group: another group's id is a 404 worded as for an id that never existed. These calls
are not generations: nothing is admitted or metered, and the only database read is the
one they ask for (a response still waiting to be written is found in memory).
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from parley.domain.numbers import whole_number
from parley.domain.responses import StoredResponse
from parley.errors import InvalidRequest, NotFound
from parley.pipeline.context import caller, services

MAX_PAGE = 100
DEFAULT_PAGE = 20


async def retrieve_response(request: web.Request) -> web.StreamResponse:
    found = await _find(request)
    return web.Response(body=found.response.encode(), content_type="application/json")


async def delete_response(request: web.Request) -> web.StreamResponse:
    response_id = request.match_info["response_id"]
    deleted = await services(request).responses.delete(response_id, caller(request).group.id)
    if not deleted:
        raise _missing(response_id)
    body = {"id": response_id, "object": "response", "deleted": True}
    return web.Response(body=orjson.dumps(body), content_type="application/json")


async def list_input_items(request: web.Request) -> web.StreamResponse:
    """The response's input items as an OpenAI list: ``limit`` (1 to 100, default 20),
    ``order`` (``desc``, the default, or ``asc``), ``after`` and ``before`` (item ids)."""
    query = request.query
    limit = _limit(query.get("limit"))
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("'order' must be 'asc' or 'desc'.", param="order")
    found = await _find(request)
    items: list[dict[str, Any]] = orjson.loads(found.input_items)
    if order == "desc":
        items.reverse()
    after, before = query.get("after"), query.get("before")
    if after is not None:
        items = items[_position(items, after, "after") + 1 :]
    if before is not None:
        items = items[: _position(items, before, "before")]
    page = items[:limit]
    body = {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > limit,
    }
    return web.Response(body=orjson.dumps(body), content_type="application/json")


async def _find(request: web.Request) -> StoredResponse:
    response_id = request.match_info["response_id"]
    found = await services(request).responses.find(response_id, caller(request).group.id)
    if found is None:
        raise _missing(response_id)
    return found


def _missing(response_id: str) -> NotFound:
    return NotFound(f"Response with id '{response_id}' not found.", param="response_id")


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_PAGE
    number = whole_number(value, 1, MAX_PAGE)
    if number is None:
        raise InvalidRequest(f"'limit' must be an integer from 1 to {MAX_PAGE}.", param="limit")
    return number


def _position(items: list[dict[str, Any]], item_id: str, name: str) -> int:
    for index, item in enumerate(items):
        if item.get("id") == item_id:
            return index
    raise InvalidRequest(f"'{name}' names no item of this response.", param=name)
