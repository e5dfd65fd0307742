"""Route handlers whose module is imported by their first request, not at start.

A worker imports only what serving ``/v1`` needs. The admin API, the dashboard (with
Jinja2) and the OpenAPI description are registered like every route, so routing,
``405`` and the route list are the same, but with ``deferred("module:function")`` as
the handler: the module is imported when the first request reaches it, and that
function handles it and every later one, so a worker that never serves them never
carries their modules.

``tests/unit/test_lean_worker.py`` resolves every deferred handler of the app, so a
misspelled target fails the suite, not a first request.
"""

from __future__ import annotations

import importlib
import inspect

from aiohttp import web
from aiohttp.typedefs import Handler


class Deferred:
    """``module:function``, imported on first use."""

    __slots__ = ("_handler", "target")

    def __init__(self, target: str) -> None:
        if target.count(":") != 1:
            raise ValueError(f"a deferred handler is 'module:function', not {target!r}")
        self.target = target
        self._handler: Handler | None = None

    def resolve(self) -> Handler:
        handler = self._handler
        if handler is None:
            module, _, name = self.target.partition(":")
            handler = self._handler = getattr(importlib.import_module(module), name)
        return handler

    async def handle(self, request: web.Request) -> web.StreamResponse:
        return await self.resolve()(request)


def deferred(target: str) -> Handler:
    """A handler for ``target`` (``"parley.admin.api:list_groups"``), imported when first
    called. aiohttp wants a coroutine function: this is the bound ``Deferred.handle``."""
    return Deferred(target).handle


def deferred_of(handler: Handler) -> Deferred | None:
    """The ``Deferred`` behind a route's handler, if it is one; behind the edge too, whose
    wrappers name what they wrap (``functools.wraps``'s ``__wrapped__``)."""
    owner = getattr(inspect.unwrap(handler), "__self__", None)
    return owner if isinstance(owner, Deferred) else None
