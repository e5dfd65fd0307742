"""Stage 4: call the upstream through its adapter, falling over to the next route.

A route is abandoned for the next one only when nothing reached the caller yet and the
failure says another channel may do better: the channel was unreachable, or answered
5xx, 429, 401 or 403. A timeout is not retried (the upstream may still be working on
it), and a refusal of the request itself (400, 404, 422...) is relayed to the caller.

The stage knows nothing of the operation: the job says how to call one route (or open a
stream on one route); this module only decides which routes are tried, in what order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TypeVar

from parley.errors import ServiceUnavailable, UpstreamError, UpstreamTimeout
from parley.pipeline.job import Batches
from parley.pipeline.route import Route
from parley.providers.base import UpstreamRefused

R = TypeVar("R")
B = TypeVar("B")


def _may_fall_over(error: UpstreamError) -> bool:
    if isinstance(error, UpstreamTimeout):
        return False
    if isinstance(error, UpstreamRefused):
        return error.retryable
    return True


def _no_route(model: str) -> ServiceUnavailable:
    return ServiceUnavailable(f"No channel is configured to serve the model `{model}`.")


async def relay(
    routes: Sequence[Route], call: Callable[[Route], Awaitable[R]], model: str
) -> tuple[R, Route]:
    """The whole reply from the first route that gives one."""
    if not routes:
        raise _no_route(model)
    for route in routes[:-1]:
        try:
            return await _attempt(route, call), route
        except UpstreamError as error:
            if not _may_fall_over(error):
                raise
    return await _attempt(routes[-1], call), routes[-1]


async def _attempt(route: Route, call: Callable[[Route], Awaitable[R]]) -> R:
    try:
        return await call(route)
    except UpstreamError as error:
        error.channel = route.target.channel  # the usage record names the failing channel
        raise


@asynccontextmanager
async def relay_stream(
    routes: Sequence[Route],
    open_route: Callable[[Route], AbstractAsyncContextManager[Batches[B]]],
    model: str,
) -> AsyncIterator[tuple[Route, Sequence[B], Batches[B]]]:
    """The first route whose stream starts, its first batch (empty if the stream ended at
    once) and the batches after it. The first batch is awaited here, so that a route that
    fails before sending anything is fallen over."""
    if not routes:
        raise _no_route(model)
    for index, route in enumerate(routes):
        async with AsyncExitStack() as stack:
            try:
                batches = await stack.enter_async_context(open_route(route))
                first = await anext(batches, None)
            except UpstreamError as error:
                error.channel = route.target.channel
                if index == len(routes) - 1 or not _may_fall_over(error):
                    raise
                continue
            yield route, first or (), batches
            return
