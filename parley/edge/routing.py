"""Routes served behind the edge, and the catch-all route for requests no route serves.

Parley wraps each handler when its route is added (``behind``) instead of installing
aiohttp middlewares: an application with any middleware, a sub-application's included,
has aiohttp build and run its middleware chain for every request (docs/performance.md,
Speed habits). Without middlewares aiohttp answers a request no route serves with its
own plain-text 404 or 405, so each router ends with ``catch_all``: a route for every
method and path that raises the same 404 or 405, behind the same edge as every other
route, which turns it into the envelope (or a dashboard page) like any other refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NoReturn

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler

Edge = Callable[[Handler], Handler]
"""What stands in front of a handler: a handler that calls it, or refuses first."""
UNROUTED = "unrouted"
"""The catch-all route's name, in each router that has one."""
ANY = frozenset({hdrs.METH_ANY})


def behind(edge: Edge, routes: Iterable[web.RouteDef]) -> list[web.RouteDef]:
    """``routes`` with each handler behind ``edge``."""
    return [web.RouteDef(r.method, r.path, edge(r.handler), r.kwargs) for r in routes]


def catch_all(router: web.UrlDispatcher, edge: Edge) -> None:
    """Add the route that serves what no other route of ``router`` does, last: any path,
    line breaks and all (``(?s:…)``: a path may hold an encoded newline)."""
    router.add_route("*", "/{unrouted:(?s:.*)}", edge(unrouted), name=UNROUTED)


async def unrouted(request: web.Request) -> NoReturn:
    """Refuse a request no route serves: 405, naming the methods allowed, where a route
    serves its path with other methods; 404 otherwise. Only refused requests pay for
    the second look through the routes."""
    allowed: set[str] = set()
    for resource in request.app.router.resources():
        if isinstance(resource, web.Resource) and resource.name != UNROUTED:
            _, methods = await resource.resolve(request)
            allowed |= methods - ANY  # a catch-all of a prefix path (the admin's "/admin")
    if allowed:
        raise web.HTTPMethodNotAllowed(request.method, allowed)
    raise web.HTTPNotFound()
