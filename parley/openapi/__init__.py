"""The OpenAPI 3.1 description of ``/v1`` and ``/admin``, served at ``GET /openapi.json``.

Written by hand, as data: one module per area (``textgen``, ``catalog``, ``billing``,
``admin``, ``admin_channels``…), each with ``PATHS`` and ``SCHEMAS``; ``document()``
merges them (a path or a schema named twice is an error). To describe a new area, add a
module with the same two names and list it in ``PARTS``. ``tests/edge/test_fuzz.py``
fuzzes every operation listed here against a live gateway, and checks that every route
the app serves is described.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import orjson
from aiohttp import web

import parley
from parley.openapi import (
    admin,
    admin_batches,
    admin_channels,
    admin_keys,
    admin_models,
    batches,
    billing,
    catalog,
    components,
    embeddings,
    images,
    messages,
    ranking,
    realtime,
    responses,
    speech,
    textgen,
    transcription,
)

PARTS: tuple[ModuleType, ...] = (
    textgen,
    messages,
    responses,
    embeddings,
    ranking,
    images,
    catalog,
    billing,
    batches,
    speech,
    transcription,
    realtime,
    admin,
    admin_batches,
    admin_channels,
    admin_keys,
    admin_models,
)


def document(parts: Sequence[ModuleType] = PARTS) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = dict(components.SCHEMAS)
    for part in parts:
        _merge(paths, part.PATHS, f"{part.__name__}: path")
        _merge(schemas, part.SCHEMAS, f"{part.__name__}: schema")
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Parley",
            "version": parley.__version__,
            "description": "An AI gateway: many providers behind one OpenAI-style API, and "
            "Anthropic's Messages API. Every reply that is not a success is the OpenAI error "
            "envelope (Anthropic's error shape on the Messages API).",
        },
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": components.SECURITY_SCHEMES},
    }


def _merge(into: dict[str, Any], more: dict[str, Any], what: str) -> None:
    for name, value in more.items():
        if name in into:
            raise ValueError(f"{what} `{name}` is described twice")
        into[name] = value


async def openapi_json(request: web.Request) -> web.Response:
    """``GET /openapi.json``, rendered for each request (a few milliseconds; it is asked
    for rarely). ``create_app`` registers it deferred: this package is imported by the
    first request, not by every worker."""
    return web.Response(body=orjson.dumps(document()), content_type="application/json")
