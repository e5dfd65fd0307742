"""A realtime session's life, whatever speaks it (an upstream's session relayed,
``pipeline/realtime.py``, or Parley's own cascade, ``api/cascade.py``): how it is entered
in the book of live sessions, told the group's rate limits, and ended, with its close
codes and the reasons it tells the caller."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

from aiohttp import web

from parley.errors import ParleyError
from parley.pipeline.authenticate import Caller
from parley.pipeline.services import Services
from parley.runtime.live_sessions import LiveSession, LiveSessions

log = logging.getLogger("parley.realtime")

ENDPOINT = "/v1/realtime"
NORMAL = 1000
GOING_AWAY = 1001
POLICY = 1008
TOO_BIG = 1009
UPSTREAM_FAILED = 1011
RESTARTING = 1012
CLOSE_SECONDS = 2.0
"""How long the caller has to take the last event and the close."""
SHUTTING_DOWN = "The gateway is shutting down; reconnect to start a new session."
SESSION_OVER = "Your session hit the maximum duration of {} seconds."
IDLE = "The session was idle for {} seconds and is closed."
TOO_SLOW = "The caller read events too slowly; the session is closed."
TOO_LARGE = "An event was larger than the {} bytes a session accepts."


class Ending(Exception):
    """The session ends: close the caller's socket with ``code`` and ``reason``, after an
    ``error`` event when ``event`` is set."""

    def __init__(
        self, code: int, reason: str, event: str | None = None, *, upstream: bool = False
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.event = event
        self.upstream = upstream
        """The upstream ended the session (its open turns are recorded as cut by it)."""


async def close_caller(
    socket: web.WebSocketResponse, ending: Ending, caller: Caller, abort: Callable[[], None]
) -> None:
    """Tell the caller why its session ends (an error event, when there is one), then
    close with the code; a caller that cannot take even that is cut (``abort``)."""
    if ending.code != NORMAL or ending.event is not None:
        log.info("realtime session of key %s ended: %s", caller.key.id, ending.reason)
    try:
        async with asyncio.timeout(CLOSE_SECONDS):
            if ending.event is not None and not socket.closed:
                await socket.send_str(ending.event)
            await socket.close(code=ending.code, message=ending.reason[:120].encode())
    except (TimeoutError, ConnectionError):
        abort()


async def rate_limits(svc: Services, scopes: Any) -> list[dict[str, Any]]:
    """The group's (and key's) limits as they stand, in ``rate_limits.updated``'s shape."""
    try:
        decision = await svc.limiter.peek(scopes)
    except ParleyError:
        return []
    limits = []
    for name, window in (("requests", decision.requests), ("tokens", decision.tokens)):
        if window is not None:
            limits.append(
                {
                    "name": name,
                    "limit": window.limit,
                    "remaining": window.remaining,
                    "reset_seconds": round(window.reset_seconds, 3),
                }
            )
    return limits


@contextlib.contextmanager
def live_session(
    book: LiveSessions, caller: Caller, model: str, kind: str
) -> Iterator[LiveSession]:
    """The session entered in the book of live sessions while it runs (the dashboard's
    Realtime page, ``/metrics``), whatever kind it is (``relay``, ``cascade``)."""
    entry = book.opened(
        model=model,
        kind=kind,
        group_id=caller.group.id,
        group=caller.group.name,
        key_id=caller.key.id,
        key_name=caller.key.name,
        key_prefix=caller.prefix,
    )
    try:
        yield entry
    finally:
        book.closed(entry)
