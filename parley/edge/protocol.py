"""aiohttp's connection protocol, with Parley's answer to what never reaches the app.

``RequestHandler.handle_error`` is where aiohttp answers a request its parser refused
(and a handler failure the edge did not catch); ``log_exception`` is the one way it logs
an exception; ``data_received`` is where a parse error mid-body is queued, and where a
request whose target names no path (``CONNECT host:port``), which no route can serve, is
refused as a malformed one. ``EdgeProtocol`` overrides the three, and ``EdgeServer``
(aiohttp's ``Server``, the protocol factory) builds ``EdgeProtocol`` connections. The
overrides read two of ``RequestHandler``'s own attributes (``_messages``,
``_current_request``): the seam is aiohttp 3.x's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp.http_exceptions import InvalidURLError
from aiohttp.web_protocol import RequestHandler, RequestPayloadError, _ErrInfo
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse
from aiohttp.web_server import Server

from parley.api.reply import error_response
from parley.edge.refusals import RefusalLog, refusal_for
from parley.errors import INTERNAL_ERROR_MESSAGE, HttpStatusError, ParleyError

NO_PATH = "the request target names no path"


class EdgeProtocol(RequestHandler):
    """One HTTP/1.1 connection; every reply it makes itself is the OpenAI envelope."""

    __slots__ = ("_refusals",)

    def __init__(self, manager: Server, *, refusals: RefusalLog, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._refusals = refusals

    def data_received(self, data: bytes) -> None:
        messages = self._messages
        queued = len(messages)
        super().data_received(data)
        began = len(messages) - queued  # the requests this read began: nearly always 0 or 1
        if not began:
            return
        if began > 1:  # pipelined: the others' targets, the last's below
            for index in range(queued, len(messages) - 1):
                message, body = messages[index]
                if not isinstance(message, _ErrInfo) and _no_path_in(message.path):
                    messages[index] = (_no_path(), body)
        message, body = messages[-1]
        if isinstance(message, _ErrInfo):
            self._fail_unfinished_bodies()
        elif message.path[:1] != "/" and _no_path_in(message.path):
            messages[-1] = (_no_path(), body)

    def _fail_unfinished_bodies(self) -> None:
        """The parser gave up mid-body: the bodies it was filling end now, with an error.

        aiohttp queues the parse error as a request of its own and leaves the body being
        read neither whole nor failed, so its handler would wait for bytes that can
        never be parsed. Failing it makes that handler answer 400 at once.
        """
        bodies = [payload for _, payload in self._messages]
        if self._current_request is not None:
            bodies.append(self._current_request.content)
        for body in bodies:
            if not body.is_eof() and body.exception() is None:
                body.set_exception(RequestPayloadError("the request body's framing is malformed"))

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> StreamResponse:
        """The envelope for a refused request, or for a failure the edge did not catch."""
        error = refusal_for(exc) if status == 400 else _server_error(status)
        self._refusals.refused(request.remote, error.status, exc)
        if request.writer.output_size > 0:  # a reply has started: no second one
            raise ConnectionError("a reply has started; closing the connection")
        response = error_response(error)
        response.force_close()
        return response

    def log_exception(self, *args: Any, **kw: Any) -> None:
        """aiohttp's own failures (a body read after the reply, for one) in a short line."""
        exc = kw.get("exc_info")
        what = exc if isinstance(exc, BaseException) else str(args[0])[:60] if args else None
        self._refusals.refused(_peer(self), 0, what)


def _no_path_in(target: str) -> bool:
    """Whether a request target names no path: neither origin-form (``/v1/models``) nor
    absolute-form (``http://host/v1/models``)."""
    return target[:1] != "/" and "://" not in target


def _no_path() -> _ErrInfo:
    """A request target that names no path (``CONNECT``'s ``host:port``, ``OPTIONS``'
    ``*``), refused as the parser refuses a malformed one: no route can serve it, and
    aiohttp's own plain-text 404 for it would never reach the edge."""
    refused = InvalidURLError(NO_PATH)
    return _ErrInfo(status=400, exc=refused, message=NO_PATH)


def _server_error(status: int) -> ParleyError:
    """aiohttp's 500 (an exception the edge did not catch) or 504 (its handler timeout)."""
    code = "timeout" if status == 504 else None
    return HttpStatusError(INTERNAL_ERROR_MESSAGE, status=max(status, 500), code=code)


def _peer(protocol: RequestHandler) -> str | None:
    peer = protocol.peername
    if isinstance(peer, tuple):
        return str(peer[0])
    return peer


class EdgeServer(Server):
    """aiohttp's protocol factory, building ``EdgeProtocol`` connections; it keeps the
    most connections open at once, so the worker knows when a burst ended (``fell_by``)."""

    def __init__(self, *args: Any, refusals: RefusalLog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refusals = refusals
        self._high_water = 0

    def __call__(self) -> RequestHandler:
        return EdgeProtocol(self, refusals=self.refusals, loop=self._loop, **self._kwargs)

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        opened = len(self._connections)
        self._high_water = max(self._high_water, opened)

    def fell_by(self) -> int:
        """How many fewer connections are open now than at the most since the last call
        (0 while they only grew); the count starts again from now."""
        now = len(self._connections)
        fell, self._high_water = max(self._high_water - now, 0), now
        return fell
