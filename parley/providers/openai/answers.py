"""What the OpenAI adapter does with an upstream's answers, shared by every adapter of a
JSON-over-HTTP upstream (the Anthropic one too): a whole reply read and checked
(``whole_reply``), a stream's first answer checked (``check_stream_start``), and a
translator's failure named in the error tree (``stream_fault``). An error status is a
``refusal`` (``openai/refusal.py``); an error event is read by the adapter's own dialect
(a ``ReadFailure``: ``openai.refusal.stream_failure``, ``anthropic.refusal.stream_failure``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from parley import upstream_json
from parley.dialects.translator import Failure
from parley.domain.wire import JSON
from parley.errors import ParleyError, UpstreamError
from parley.http import Reply
from parley.providers.base import Target, stream_cut_short, upstream_failure
from parley.providers.openai.refusal import refusal
from parley.sse import EventTooLarge

ReadFailure = Callable[[str, JSON, str | None], UpstreamError]
"""A dialect's error for an upstream's error object: (channel, the object, its key)."""
IsError = Callable[[JSON], bool]
Refusal = Callable[[str, int, bytes, str | None, Mapping[bytes, bytes] | None], UpstreamError]
"""How an adapter reads an HTTP error answer: ``refusal``, or its provider's own."""
"""Whether a JSON answer in place of a stream is the dialect's error object."""


def malformed(channel: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream channel `{channel}` sent a reply that is not a JSON object."
    )


async def whole_reply(sending: Awaitable[Reply], target: Target, limit: int) -> JSON:
    """The JSON object the upstream answers to the request ``sending`` sends; its refusal
    or a reply that is not a JSON object (at most ``limit`` bytes) raised in the tree."""
    # ``upstream_errors``, written out: its generator-based context would cost every
    # whole reply a generator and three of its steps.
    try:
        response = await sending
        raw = await response.read(limit)
        if response.status >= 300:
            raise refusal(target.channel, response.status, raw, target.api_key, response.headers)
        reply = upstream_json.loads(raw)
    except ParleyError:
        raise
    except Exception as error:
        failure = upstream_failure(target.channel, error)
        if failure is None:
            raise
        raise failure from None
    if not isinstance(reply, dict):
        raise malformed(target.channel)
    return reply


async def check_stream_start(
    reply: Reply,
    target: Target,
    limit: int,
    is_error: IsError,
    read_failure: ReadFailure,
    *,
    refused: Refusal = refusal,
) -> None:
    """Raise if the upstream refused (the error ``refused`` reads from its answer), or
    answered without streaming (its error object read by ``read_failure``)."""
    channel = target.channel
    if reply.status >= 300:
        raw = await reply.read(limit)
        raise refused(channel, reply.status, raw, target.api_key, reply.headers)
    if reply.content_type == "text/event-stream":
        return
    body = upstream_json.loads(await reply.read(limit))
    if isinstance(body, dict) and is_error(body):
        raise read_failure(channel, body, target.api_key)
    raise UpstreamError(f"The upstream channel `{channel}` did not stream its reply.")


def stream_fault(target: Target, failure: Failure, read_failure: ReadFailure) -> UpstreamError:
    """The error for what a translator saw go wrong in a stream: the upstream's error
    event, an event over the size bound, a body that ended before the stream did, or
    an event that is not a JSON object."""
    if failure.payload is not None:
        return read_failure(target.channel, failure.payload, target.api_key)
    if failure.too_large:
        error = upstream_failure(target.channel, EventTooLarge(0, []))
        assert error is not None
        return error
    if failure.truncated:
        return stream_cut_short(target.channel)
    return malformed(target.channel)


def stream_start(
    target: Target, limit: int, is_error: IsError, read_failure: ReadFailure
) -> Callable[[Reply], Awaitable[None]]:
    """``check_stream_start`` for one route, as ``TranslatedStream`` takes it."""

    def start(reply: Reply) -> Awaitable[None]:
        return check_stream_start(reply, target, limit, is_error, read_failure)

    return start


def faults(target: Target, read_failure: ReadFailure) -> Callable[[Failure], UpstreamError]:
    """``stream_fault`` for one route, as ``TranslatedStream`` takes it."""

    def fault(failure: Failure) -> UpstreamError:
        return stream_fault(target, failure, read_failure)

    return fault
