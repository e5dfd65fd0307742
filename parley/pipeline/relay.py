"""Stage 4: call the upstream through its adapter, falling over to the next route.

A route is abandoned for the next one only when nothing reached the caller yet and the
failure says another channel may do better: the channel was unreachable (a refused or
timed-out connection, or no free connection: the request never left), or answered 5xx,
429, 401, 403 or 404. A 404 that is the last route's answer reaches the caller as
``UpstreamModelMissing`` (the model is misconfigured on the gateway; not worth a retry).
A whole reply's read timeout is not retried (the upstream may still be working on it),
and a refusal of the request itself (400, 413, 422...) is relayed to the caller, except
that a refusal of a prompt too long for the model's context window goes
on to the call's ``on_context`` routes (``fallbacks_on_context``) when it has some.

A stream is given its route's ``first_token`` seconds to send its first event (and any
timeout before that event is fallen over: the caller has nothing yet), then its total
time, when the channel sets one, to finish.

How many routes are tried is bounded by the ``RetryPolicy`` given: at most
``max_attempts`` per call, and a retry (any attempt after a call's first) only while the
process's ``RetryBudget`` allows it.

The stage knows nothing of the operation: the job says how to call one route (or open a
stream on one route); this module only decides which routes are tried, in what order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Generic, TypeVar

from parley.errors import (
    ServiceUnavailable,
    UpstreamError,
    UpstreamModelMissing,
    UpstreamRefused,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from parley.pipeline.job import Batches
from parley.pipeline.retries import UNLIMITED, RetryPolicy, Tries
from parley.pipeline.route import Route

R = TypeVar("R")
B = TypeVar("B")


CONTEXT_EXCEEDED = "context_length_exceeded"
NOT_FOUND = 404


class FirstTokenTimeout(UpstreamTimeout):
    """A stream sent nothing within its channel's ``first_token`` seconds."""


def _may_fall_over(error: UpstreamError, streaming: bool) -> bool:
    if isinstance(error, UpstreamTimeout):
        return streaming  # a stream's timeouts here all come before its first event
    if isinstance(error, UpstreamRefused):
        return error.retryable
    return True


def _too_long(error: UpstreamError) -> bool:
    return isinstance(error, UpstreamRefused) and error.code == CONTEXT_EXCEEDED


def _next_route(
    tries: Tries, error: UpstreamError, streaming: bool, left: Sequence[Route]
) -> tuple[Route | None, Sequence[Route]]:
    """The route after a failed attempt and the routes after it; ``None`` to give up."""
    if _too_long(error) and tries.on_context:
        left, tries.on_context = tries.on_context, ()
    elif not _may_fall_over(error, streaming):
        return None, ()
    if not left or not tries.another(never_left=isinstance(error, UpstreamUnreachable)):
        return None, ()
    return left[0], left[1:]


def _told(error: UpstreamError, route: Route, model: str) -> UpstreamError:
    """The error the caller is told when ``route`` was the last one tried: a bare 404
    from its upstream says the model is misconfigured here (``UpstreamModelMissing``)."""
    if (
        isinstance(error, UpstreamRefused)
        and not isinstance(error, UpstreamRejected)
        and error.upstream_status == NOT_FOUND
    ):
        return UpstreamModelMissing(route.model or model, route.target.channel)
    return error


def _no_route(model: str) -> ServiceUnavailable:
    return ServiceUnavailable(f"No channel is configured to serve the model `{model}`.")


Failed = Callable[[Route, UpstreamError, float], None]
"""Told of each failed attempt: the route, the error, the attempt's seconds. How the
caller learns which channel failed: the route of the last call before an error is raised
is the one whose upstream failed (a failure after a stream started is its route's)."""


def _ignore(route: Route, error: UpstreamError, seconds: float) -> None:
    return None


async def relay(
    routes: Sequence[Route],
    call: Callable[[Route], Awaitable[R]],
    model: str,
    failed: Failed = _ignore,
    *,
    policy: RetryPolicy = UNLIMITED,
) -> tuple[R, Route]:
    """The whole reply from the first route that gives one."""
    if not routes:
        raise _no_route(model)
    route: Route | None = routes[0]
    tries: Tries | None = None
    left: Sequence[Route] = ()
    while route is not None:
        started = time.monotonic()
        try:
            if route.total is None:  # ``_attempt``'s common case, without its coroutine
                return await call(route), route
            return await _attempt(route, call), route
        except UpstreamError as error:
            failed(route, error, time.monotonic() - started)
            if tries is None:  # the first failure: what the call has left, from now on
                tries, left = policy.start(), routes[1:]
            last = route
            route, left = _next_route(tries, error, False, left)
            if route is None:
                told = _told(error, last, model)
                if told is error:
                    raise
                raise told from None
    raise AssertionError("unreachable: the last route returns or raises")


async def _attempt(route: Route, call: Callable[[Route], Awaitable[R]]) -> R:
    if route.total is None:
        return await call(route)
    try:
        async with asyncio.timeout(route.total):
            return await call(route)
    except TimeoutError:
        raise _out_of_time(route.target.channel) from None


def _out_of_time(channel: str) -> UpstreamTimeout:
    return UpstreamTimeout(f"The upstream channel `{channel}` did not finish in time.")


def relay_stream(
    routes: Sequence[Route],
    open_route: Callable[[Route], AbstractAsyncContextManager[Batches[B]]],
    model: str,
    failed: Failed = _ignore,
    *,
    policy: RetryPolicy = UNLIMITED,
    task: asyncio.Task[Any] | None = None,
) -> AbstractAsyncContextManager[tuple[Route, Sequence[B], Batches[B]]]:
    """The first route whose stream starts, its first batch (empty if the stream ended at
    once) and the batches after it. The first batch is awaited here, so that a route that
    fails (or stays silent) before sending anything is fallen over. ``task`` is the
    caller's (found when not given), which a first-token timeout cancels."""
    return _StreamRelay(routes, open_route, model, failed, policy=policy, task=task)


class _Deadline:
    """Cancels ``task`` after ``seconds`` unless cancelled first; ``expired`` tells its
    cancellation from the caller's own. The task is cancelled while it awaits, so the
    awaited step raises ``CancelledError`` rather than complete."""

    __slots__ = ("_handle", "_task", "expired")

    def __init__(self, task: asyncio.Task[Any], seconds: float) -> None:
        self._task = task
        self.expired = False
        self._handle = task.get_loop().call_later(seconds, self._expire)

    def _expire(self) -> None:
        self.expired = True
        self._task.cancel()

    def cancel(self) -> None:
        self._handle.cancel()


class _StreamRelay(Generic[B]):
    """``relay_stream``'s context: what ``@asynccontextmanager`` and an ``AsyncExitStack``
    per route did, written out (they cost every stream two generators, a stack and its
    exit callbacks). A route's stream that fails on its first batch is closed before the
    next route is tried. A route with a total time keeps a timer until the stream ends."""

    __slots__ = (
        "_failed",
        "_model",
        "_open",
        "_opened",
        "_policy",
        "_route",
        "_routes",
        "_task",
        "_timer",
    )

    def __init__(
        self,
        routes: Sequence[Route],
        open_route: Callable[[Route], AbstractAsyncContextManager[Batches[B]]],
        model: str,
        failed: Failed,
        *,
        policy: RetryPolicy,
        task: asyncio.Task[Any] | None,
    ) -> None:
        self._task = task
        self._routes = routes
        self._open = open_route
        self._model = model
        self._failed = failed
        self._policy = policy
        self._opened: AbstractAsyncContextManager[Batches[B]] | None = None
        self._timer: asyncio.Timeout | None = None
        self._route: Route | None = None

    async def __aenter__(self) -> tuple[Route, Sequence[B], Batches[B]]:
        routes = self._routes
        if not routes:
            raise _no_route(self._model)
        task = self._task or asyncio.current_task()
        assert task is not None
        route: Route | None = routes[0]
        left: Sequence[Route] | None = None
        tries: Tries | None = None
        while route is not None:
            started = time.monotonic()
            # Opening the stream and its first batch, bounded by the first-token time (a
            # timer on the loop, not ``asyncio.timeout``: this runs once per stream).
            deadline = _Deadline(task, route.first_token)
            try:
                opened: AbstractAsyncContextManager[Batches[B]] | None = self._open(route)
                assert opened is not None
                batches = await opened.__aenter__()
                try:
                    first = await anext(batches, None)
                except BaseException as failure:
                    if not await opened.__aexit__(type(failure), failure, failure.__traceback__):
                        raise
                    opened = None  # the adapter swallowed its failure: next route
            except asyncio.CancelledError:
                if not deadline.expired:
                    raise
                task.uncancel()
                error: UpstreamError = FirstTokenTimeout(
                    f"The upstream channel `{route.target.channel}` sent nothing in time."
                )
            except UpstreamError as failure:
                error = failure
            else:
                if opened is not None:
                    self._opened, self._route = opened, route
                    if route.total is not None:
                        await self._started(route, started)
                    return route, first or (), batches
                left = routes[1:] if left is None else left
                route, left = (left[0], left[1:]) if left else (None, ())
                continue
            finally:
                deadline.cancel()
            self._failed(route, error, time.monotonic() - started)
            tries = tries or self._policy.start()
            last = route
            route, left = _next_route(tries, error, True, routes[1:] if left is None else left)
            if route is None:
                raise _told(error, last, self._model)
        raise RuntimeError("no route's stream started")  # only if an adapter swallowed its error

    async def _started(self, route: Route, started: float) -> None:
        """Start the timer of the route's total time, which ``__aexit__`` ends."""
        assert route.total is not None
        loop = asyncio.get_running_loop()
        timer = asyncio.timeout_at(loop.time() + route.total - (time.monotonic() - started))
        await timer.__aenter__()
        self._timer = timer

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        opened, self._opened = self._opened, None
        timer, self._timer = self._timer, None
        if opened is None:
            return None
        if timer is not None:
            try:
                await timer.__aexit__(kind, error, traceback)
            except TimeoutError:
                assert self._route is not None
                late = _out_of_time(self._route.target.channel)
                await opened.__aexit__(UpstreamTimeout, late, None)
                raise late from None
        return await opened.__aexit__(kind, error, traceback)
