"""Typed keys for what the app and a request carry between the edge and handlers."""

from __future__ import annotations

from aiohttp import web

from parley.domain.client_secrets import ClientSecret
from parley.pipeline.authenticate import Caller
from parley.pipeline.services import Services

SERVICES = web.AppKey("services", Services)
CALLER = web.RequestKey("caller", Caller)
REPLY_HEADERS = web.RequestKey("reply_headers", dict[str, str])
REQUEST_BODY = web.RequestKey("request_body", bytes)
"""A JSON body's bytes as read (``api/body.py``): what the content log may keep."""
ADMITTED = web.RequestKey("admitted", bool)
"""Set by the runner once a call is admitted: ``Metered`` logs it, the edge does not."""
CLIENT_SECRET = web.RequestKey("client_secret", ClientSecret)
"""The realtime client secret a session was opened with (what it is bound to)."""
REFUSED_MODEL = web.RequestKey("refused_model", tuple[str, str])
"""The model name the caller gave, and the public model it resolved to ("" if none)."""


def services(request: web.Request) -> Services:
    return request.app[SERVICES]


def caller(request: web.Request) -> Caller:
    return request[CALLER]
