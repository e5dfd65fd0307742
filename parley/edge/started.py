"""When something fails after a reply has begun: no second reply on the same connection.

Once a handler has called ``prepare()``, the status line and headers are on the wire; an
error envelope written after them would be a second ``HTTP/1.1 500`` in the middle of
the first reply's body. Instead, an event stream (``text/event-stream``) gets the error
as one last event and ``[DONE]``, then ends; any other reply is cut (the connection is
closed without ending the body, so the client sees it incomplete, never as whole). The
connection is closed either way.
"""

from __future__ import annotations

import contextlib

from aiohttp import web

from parley.errors import ParleyError, encode_error_event

STARTED = web.RequestKey("started_reply", web.StreamResponse)
DONE = b"data: [DONE]\n\n"


def remember_started(request: web.Request, response: web.StreamResponse) -> None:
    """Called by the app's ``on_response_prepare`` hook: note the reply whose head is
    being sent."""
    request[STARTED] = response


def started_reply(request: web.Request) -> web.StreamResponse | None:
    return request.get(STARTED)


async def end_started_reply(
    request: web.Request, response: web.StreamResponse, error: ParleyError
) -> web.StreamResponse:
    """End ``response`` after ``error``: one error event if it is SSE, then close."""
    response.force_close()
    if response.content_type == "text/event-stream":
        with contextlib.suppress(ConnectionError, RuntimeError):  # gone, or already ended
            await response.write(encode_error_event(error) + DONE)
        return response
    if request.transport is not None:
        request.transport.close()
    return response
