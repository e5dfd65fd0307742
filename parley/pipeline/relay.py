"""Stage 4: call the upstream through its adapter, falling over to the next route.

A route is abandoned for the next one only when nothing reached the caller yet and the
failure says another channel may do better: the channel was unreachable, or answered
5xx, 429, 401 or 403. A timeout is not retried (the upstream may still be working on
it), and a refusal of the request itself (400, 404, 422...) is relayed to the caller.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Literal

from parley.errors import ServiceUnavailable, UpstreamError, UpstreamTimeout
from parley.pipeline.route import Route
from parley.providers.base import JSON, Batches, UpstreamRefused
from parley.providers.registry import ProviderRegistry

Operation = Literal["chat", "completion"]


def _may_fall_over(error: UpstreamError) -> bool:
    if isinstance(error, UpstreamTimeout):
        return False
    if isinstance(error, UpstreamRefused):
        return error.retryable
    return True


def _no_route(model: str) -> ServiceUnavailable:
    return ServiceUnavailable(f"No channel is configured to serve the model `{model}`.")


async def relay(
    providers: ProviderRegistry, routes: Sequence[Route], operation: Operation, body: JSON
) -> tuple[JSON, Route]:
    """The whole reply from the first route that gives one."""
    if not routes:
        raise _no_route(str(body.get("model")))
    for route in routes[:-1]:
        try:
            return await _call(providers, route, operation, body), route
        except UpstreamError as error:
            if not _may_fall_over(error):
                raise
    return await _call(providers, routes[-1], operation, body), routes[-1]


async def _call(
    providers: ProviderRegistry, route: Route, operation: Operation, body: JSON
) -> JSON:
    try:
        if operation == "chat":
            return await providers.chat(route.provider_type).chat(route.target, body)
        return await providers.completion(route.provider_type).completion(route.target, body)
    except UpstreamError as error:
        error.channel = route.target.channel  # the meter's record names the failing channel
        raise


@asynccontextmanager
async def relay_stream(
    providers: ProviderRegistry, routes: Sequence[Route], operation: Operation, body: JSON
) -> AsyncIterator[tuple[Route, Sequence[JSON], Batches]]:
    """The first route whose stream starts, its first batch (empty if the stream ended at
    once) and the batches after it. The first batch is awaited here, so that a route that
    fails before sending anything is fallen over."""
    if not routes:
        raise _no_route(str(body.get("model")))
    for index, route in enumerate(routes):
        async with AsyncExitStack() as stack:
            try:
                batches = await stack.enter_async_context(_open(providers, route, operation, body))
                first = await anext(batches, None)
            except UpstreamError as error:
                error.channel = route.target.channel
                if index == len(routes) - 1 or not _may_fall_over(error):
                    raise
                continue
            yield route, first or (), batches
            return


def _open(
    providers: ProviderRegistry, route: Route, operation: Operation, body: JSON
) -> AbstractAsyncContextManager[Batches]:
    if operation == "chat":
        return providers.chat(route.provider_type).chat_stream(route.target, body)
    return providers.completion(route.provider_type).completion_stream(route.target, body)
