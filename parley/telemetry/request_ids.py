"""An ``x-request-id`` on every reply: ``/v1`` calls, errors, ``/v1/models``, ``/health``.

An admitted call already carries its call's id (the one its usage record and its log
lines hold). Any other reply gets one when its headers are sent, from the same
per-process generator; the SDKs read the header into ``request_id``.
"""

from __future__ import annotations

from aiohttp import web

from parley.pipeline.call import RequestIds
from parley.pipeline.context import SERVICES

HEADER = "x-request-id"
REQUEST_ID = web.RequestKey("request_id", str)


def request_id(request: web.Request) -> str:
    """This request's id, made on first use."""
    known = request.get(REQUEST_ID)
    if known is None:
        svc = request.config_dict.get(SERVICES)
        known = (svc.request_ids if svc is not None else RequestIds()).new()
        request[REQUEST_ID] = known
    return known


def stamp_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """Give a reply not yet sent its ``x-request-id``, unless it has one (an admitted
    call's own, from its reply headers). The gateway's edge calls it on every reply
    it returns; a stream carries its call's id from the start."""
    if HEADER not in response.headers:
        response.headers[HEADER] = request_id(request)
