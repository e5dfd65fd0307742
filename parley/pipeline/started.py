"""When something fails after a reply has begun: no second reply on the same connection.

Once a handler has called ``prepare()``, the status line and headers are on the wire; an
error envelope written after them would be a second ``HTTP/1.1 500`` in the middle of
the first reply's body. ``end_started_reply`` is the one way such a reply ends: with its
last bytes, the failure told in the stream's own format (an event stream's error event),
or, when the format cannot say it (raw audio), by closing the connection without ending
the body, so the client sees it incomplete, never whole.

The runner (``pipeline/runner.py``) knows its job's format and hands over the job's own
``failure`` bytes. The gateway's boundary (``parley/app.py``), for a failure that escaped
any job, tells it by the reply's content type and the endpoint's dialect
(``failure_tail``): Anthropic's ``error`` event on the Messages API, OpenAI's error
event and ``[DONE]`` on any other event stream; it also closes the connection.
"""

from __future__ import annotations

import contextlib

from aiohttp import web

from parley.dialects import anthropic_messages_reply
from parley.errors import ParleyError, encode_error_event

STARTED = web.RequestKey("started_reply", web.StreamResponse)
DONE = b"data: [DONE]\n\n"
MESSAGES = "/v1/messages"
"""Anthropic's Messages API: its callers send ``x-api-key`` and read Anthropic's errors
(envelopes, and events once a stream began)."""


def note_started(request: web.Request, response: web.StreamResponse) -> None:
    """Note ``response`` as begun, just before its head is sent (``prepare``): from then
    on a failure ends that reply in its own format instead of answering with an error
    envelope. Every handler that sends its reply's head itself notes it first (a reply
    the handler returns is sent after the edge, so nothing can fail between); a reply
    begun without a note is cut by the edge, never answered a second time."""
    request[STARTED] = response


def started_reply(request: web.Request) -> web.StreamResponse | None:
    return request.get(STARTED)


async def end_started_reply(
    request: web.Request, response: web.StreamResponse, tail: bytes | None
) -> None:
    """End ``response`` after a failure: write ``tail`` (the failure in the reply's own
    format), or cut the connection when there is none. A caller already gone, or a reply
    already ended, is left as it is."""
    if tail is None:
        if request.transport is not None:
            request.transport.close()
        return
    with contextlib.suppress(ConnectionError, RuntimeError):  # gone, or already ended
        await response.write(tail)


def failure_tail(
    request: web.Request, response: web.StreamResponse, error: ParleyError
) -> bytes | None:
    """How a started reply tells ``error`` when no job said: an event stream's error
    event in the caller's dialect; ``None`` (cut) for any other reply."""
    if response.content_type != "text/event-stream":
        return None
    if request.path.startswith(MESSAGES):
        return anthropic_messages_reply.error_event(error)
    return encode_error_event(error) + DONE
