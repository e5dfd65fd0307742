"""Stage 4: call the upstream through its adapter, falling over to the next route.

A route is abandoned for the next one only when nothing reached the caller yet and the
failure says another channel may do better: the channel was unreachable (a refused or
timed-out connection, or no free connection: the request never left), or answered 5xx,
429, 401 or 403. A read timeout is not retried (the upstream may still be working on
it), and a refusal of the request itself (400, 404, 422...) is relayed to the caller.

The stage knows nothing of the operation: the job says how to call one route (or open a
stream on one route); this module only decides which routes are tried, in what order.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Generic, TypeVar

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


Failed = Callable[[Route, UpstreamError, float], None]
"""Told of each failed attempt: the route, the error, the attempt's seconds."""


def _ignore(route: Route, error: UpstreamError, seconds: float) -> None:
    return None


async def relay(
    routes: Sequence[Route],
    call: Callable[[Route], Awaitable[R]],
    model: str,
    failed: Failed = _ignore,
) -> tuple[R, Route]:
    """The whole reply from the first route that gives one."""
    if not routes:
        raise _no_route(model)
    for index, route in enumerate(routes):
        started = time.monotonic()
        try:
            return await _attempt(route, call), route
        except UpstreamError as error:
            failed(route, error, time.monotonic() - started)
            if index == len(routes) - 1 or not _may_fall_over(error):
                raise
    raise AssertionError("unreachable: the last route returns or raises")


async def _attempt(route: Route, call: Callable[[Route], Awaitable[R]]) -> R:
    try:
        return await call(route)
    except UpstreamError as error:
        error.channel = route.target.channel  # the usage record names the failing channel
        raise


def relay_stream(
    routes: Sequence[Route],
    open_route: Callable[[Route], AbstractAsyncContextManager[Batches[B]]],
    model: str,
    failed: Failed = _ignore,
) -> AbstractAsyncContextManager[tuple[Route, Sequence[B], Batches[B]]]:
    """The first route whose stream starts, its first batch (empty if the stream ended at
    once) and the batches after it. The first batch is awaited here, so that a route that
    fails before sending anything is fallen over."""
    return _StreamRelay(routes, open_route, model, failed)


class _StreamRelay(Generic[B]):
    """``relay_stream``'s context: what ``@asynccontextmanager`` and an ``AsyncExitStack``
    per route did, written out (they cost every stream two generators, a stack and its
    exit callbacks). A route's stream that fails on its first batch is left as the stack
    left it: with the error when it is raised, cleanly when the next route is tried."""

    __slots__ = ("_failed", "_model", "_open", "_opened", "_routes")

    def __init__(
        self,
        routes: Sequence[Route],
        open_route: Callable[[Route], AbstractAsyncContextManager[Batches[B]]],
        model: str,
        failed: Failed,
    ) -> None:
        self._routes = routes
        self._open = open_route
        self._model = model
        self._failed = failed
        self._opened: AbstractAsyncContextManager[Batches[B]] | None = None

    async def __aenter__(self) -> tuple[Route, Sequence[B], Batches[B]]:
        routes = self._routes
        if not routes:
            raise _no_route(self._model)
        last = len(routes) - 1
        for index, route in enumerate(routes):
            started = time.monotonic()
            opened = self._open(route)
            try:
                batches = await opened.__aenter__()
            except UpstreamError as error:
                self._attempt_failed(route, error, started, index == last)
                continue
            try:
                first = await anext(batches, None)
            except UpstreamError as error:
                try:
                    self._attempt_failed(route, error, started, index == last)
                except UpstreamError:
                    if not await opened.__aexit__(type(error), error, error.__traceback__):
                        raise
                    continue
                await opened.__aexit__(None, None, None)
                continue
            except BaseException as error:
                if not await opened.__aexit__(type(error), error, error.__traceback__):
                    raise
                continue
            self._opened = opened
            return route, first or (), batches
        raise RuntimeError("no route's stream started")  # only if an adapter swallowed its error

    def _attempt_failed(
        self, route: Route, error: UpstreamError, started: float, last: bool
    ) -> None:
        """Tell the watchers; raise ``error`` unless another route may do better."""
        error.channel = route.target.channel
        self._failed(route, error, time.monotonic() - started)
        if last or not _may_fall_over(error):
            raise error

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        opened, self._opened = self._opened, None
        if opened is None:
            return None
        return await opened.__aexit__(kind, error, traceback)
