"""Typed keys for what the app and a request carry between middleware and handlers."""

from __future__ import annotations

from aiohttp import web

from parley.pipeline.authenticate import Caller
from parley.services import Services

SERVICES = web.AppKey("services", Services)
CALLER = web.RequestKey("caller", Caller)
REPLY_HEADERS = web.RequestKey("reply_headers", dict[str, str])


def services(request: web.Request) -> Services:
    return request.app[SERVICES]


def caller(request: web.Request) -> Caller:
    return request[CALLER]
