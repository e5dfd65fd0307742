"""The runner: every ``/v1`` operation's path, after authentication, in one place.

An ``api/`` module parses the request into a job (``pipeline/job.py``) and hands it to
``reply`` (one whole reply) or ``stream`` (relayed as it arrives). The runner then takes
the call through the stages in order:

1. resolve the model the caller named, and let the job refuse it (``job.accept``);
2. admit the call: its worst case held against the budget, request and token rates
   (``pipeline/admit.py``);
3. route it: the channels that serve the model, best first (``pipeline/route.py``);
4. relay it: call (or open a stream on) one route after another until one answers,
   falling over only before the caller got a byte (``pipeline/relay.py``);
5. render the reply (the job's), and
6. meter it: once, whatever ended it (``Metered`` below, the only caller of
   ``Meter.finish``).

A call of a group whose content policy keeps anything also has a capture
(``Call.content``, ``runtime/content_capture.py``): the request body, the whole reply
or each piece of a stream as written, cut at a cap and handed to the content log when
the call is metered; a call of any other group pays one attribute check.

Metering is safe by default: from admission on, a call is recorded exactly once, with a
failure status unless it succeeded — the error's own status for a ``ParleyError``, 499
when the caller left (``CLIENT_CLOSED``), ``SHUTDOWN_STATUS`` when shutdown ended a
stream, and 500 for anything unexpected.

Once a stream's reply has started, it is its own error boundary: a failure is logged,
told to the caller in the stream's own format (an SSE error event and ``data: [DONE]``),
and the reply is ended; a second HTTP response is never written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from parley.dialects.finish import OVERLAP, finish_reasons
from parley.domain.models import batch_priced
from parley.domain.usage import Usage
from parley.errors import (
    INTERNAL_ERROR_MESSAGE,
    ParleyError,
    QuotaExceeded,
    RateLimited,
    ServiceUnavailable,
    UpstreamError,
)
from parley.pipeline.admit import admit, resolve_model
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import (
    ADMITTED,
    CALLER,
    REFUSED_MODEL,
    REPLY_HEADERS,
    REQUEST_BODY,
    SERVICES,
)
from parley.pipeline.job import Batches, Job, ReplyJob, StreamJob
from parley.pipeline.meter import Meter, failure_detail
from parley.pipeline.plan import Switching
from parley.pipeline.relay import Failed, relay, relay_stream
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.pipeline.started import end_started_reply, note_started
from parley.providers.translated import Translated
from parley.runtime.content_capture import ContentCapture
from parley.runtime.in_flight import SHUTDOWN_STATUS

log = logging.getLogger("parley.runner")

R = TypeVar("R")
B = TypeVar("B")

OK = 200
CLIENT_CLOSED = 499
"""The usage record's status for a call whose caller hung up (nginx's convention)."""
INTERNAL_ERROR = 500
NO_USAGE = Usage()
CLIENT_GONE = (ConnectionResetError, ConnectionError)
SHUTTING_DOWN = "The gateway is shutting down; retry the request."
OVERLOADED = "The gateway is catching up on usage records; retry shortly."
CALLER_LEFT = "The caller closed the connection before the reply ended."


async def reply(request: web.Request, job: ReplyJob[R]) -> web.StreamResponse:
    """Admit, route, relay and meter a call answered with one whole reply."""
    svc, call = await _admitted(request, job)
    return await _whole(request[REPLY_HEADERS], svc, call, job)


async def batch_line(
    svc: Services, caller: Caller, job: ReplyJob[R], request_id: str, body: bytes | None = None
) -> web.StreamResponse:
    """Admit, route, relay and meter one line of a batch, as ``reply`` does a request's
    call, with no HTTP request: ``caller`` is the batch's key and group, ``request_id``
    the line's (``batch_req_...``, which marks it as a batch line in the request log),
    ``body`` the line's request body (for the content log), and the model is billed at
    its batch price. The response is rendered, not sent: its status and body are the
    line's result. A refusal before admission (a rate, the
    budget, an unknown model) raises ``NotAdmitted``, and nothing is metered for it; a
    failure after it raises its ``ParleyError``, metered once as any call's."""
    try:
        call = await admitted_call(svc, caller, job, request_id, batch=True)
    except ParleyError as refusal:
        raise NotAdmitted(refusal) from None
    if caller.group.content.on:
        _capture(svc, call, body)
    if svc.tracer.on:
        svc.tracer.begin(call, {})  # a trace of its own: a line has no caller's headers
    return await _whole(call.reply_headers(), svc, call, job)


class NotAdmitted(Exception):
    """A batch line or a session's part refused before admission (``error``): nothing was
    sent or metered; ``resolved`` is the public model the name resolved to ("")."""

    def __init__(self, error: ParleyError, resolved: str = "") -> None:
        super().__init__(error.message)
        self.error = error
        self.resolved = resolved


PART_CANCELLED = "The realtime response this call was part of was cancelled."


async def part_reply(
    svc: Services, caller: Caller, job: ReplyJob[R], request_id: str
) -> web.StreamResponse:
    """Admit, route, relay and meter one part of a realtime cascade's turn answered
    whole (a transcription), as ``reply`` does a request's call, with no HTTP request:
    the response is rendered, not sent. A refusal before admission raises
    ``NotAdmitted`` (nothing metered); a failure after it, its ``ParleyError``."""
    call = await _part_admitted(svc, caller, job, request_id)
    return await _whole(call.reply_headers(), svc, call, job)


async def part_stream(
    svc: Services,
    caller: Caller,
    job: StreamJob[B],
    request_id: str,
    write: Callable[[bytes], Awaitable[None]],
) -> None:
    """Admit, route, relay and meter one streamed part of a realtime cascade's turn (the
    chat's answer, a sentence's speech), as ``stream`` does a request's call, each piece
    rendered handed to ``write`` instead of an HTTP reply. A refusal before admission
    raises ``NotAdmitted`` (nothing metered); a failure after it, its ``ParleyError``;
    a cancellation is recorded as 499 (the response cancelled, the caller gone) or as
    ``SHUTDOWN_STATUS`` (shutdown). It is billed for what it delivered, however it
    ended."""
    call = await _part_admitted(svc, caller, job, request_id)
    task = svc.in_flight.current()
    svc.in_flight.add(task)
    with Metered(svc.meter, call) as metered:
        try:
            await _part_relayed(svc, job, metered, task, write)
            metered.succeed()
        except ParleyError as error:
            cut = metered.route
            if isinstance(error, UpstreamError) and metered.first_byte is not None and cut:
                svc.watchers.tell_upstream_failed(call, cut, error, call.age())
            metered.record_failure(error.status, error.code, error)
            raise
        except asyncio.CancelledError:
            if svc.in_flight.ending(task):
                metered.record_failure(SHUTDOWN_STATUS, ServiceUnavailable.code, SHUTTING_DOWN)
            else:
                metered.record_failure(CLIENT_CLOSED, None, PART_CANCELLED)
            raise
        finally:
            svc.in_flight.discard(task)
            metered.delivered(job.delivered() if metered.first_byte is not None else None)


async def _part_admitted(svc: Services, caller: Caller, job: Job, request_id: str) -> Call:
    """Stages 1 and 2 of a session's part (``NotAdmitted`` when refused), its content
    caught and its trace begun as a request's are."""
    try:
        call = await admitted_call(svc, caller, job, request_id)
    except _Refused as refused:
        raise NotAdmitted(refused.error, refused.resolved) from None
    if caller.group.content.on:
        _capture(svc, call, None)
    if svc.tracer.on:
        svc.tracer.begin(call, {})  # a trace of its own: a part has no caller's headers
    return call


async def _part_relayed(
    svc: Services,
    job: StreamJob[B],
    metered: Metered,
    task: asyncio.Task[Any],
    write: Callable[[bytes], Awaitable[None]],
) -> None:
    """Stages 3 to 5 of a streamed part: the first route that starts, each batch
    rendered and written, then the end."""
    call = metered.call
    routes, policy, switching = svc.planner.plan(call, job)
    open_route: Callable[[Route], AbstractAsyncContextManager[Batches[B]]] = (
        switching.open if switching else job.open
    )
    if svc.tracer.on:
        open_route = svc.tracer.attempts(call, open_route)
    if call.content is not None:
        write = _capturing(write, call.content, job.content_type)
    failed = _failed(svc, metered)
    async with relay_stream(
        routes, open_route, call.model.spec.name, failed, policy=policy, task=task
    ) as opened:
        route, first, batches = opened
        _answered(svc, route, switching, call, {})
        metered.route = route
        metered.first_byte = call.age()
        svc.watchers.tell_first_byte(call, metered.first_byte)
        await write(job.render(first))
        async for batch in batches:
            data = job.render(batch)
            if data:
                await write(data)
    metered.closing = True
    await write(_end(job, call))


async def _whole(
    reply_headers: dict[str, str], svc: Services, call: Call, job: ReplyJob[R]
) -> web.StreamResponse:
    """Stages 3 to 6 of a call answered with one whole reply."""
    task = svc.in_flight.current()
    svc.in_flight.add(task)  # shutdown ends a call still waiting at the end of its grace too
    with Metered(svc.meter, call) as metered:
        try:
            model = call.model.spec.name
            routes, policy, switching = svc.planner.plan(call, job)
            attempt: Callable[[Route], Awaitable[R]] = switching.call if switching else job.call
            if svc.tracer.on:
                attempt = svc.tracer.attempts(call, attempt)
            found, route = await relay(
                routes,
                attempt,
                model,
                _failed(svc, metered),
                policy=policy,
            )
            _answered(svc, route, switching, call, reply_headers)
        except asyncio.CancelledError:
            if not svc.in_flight.ending(task):
                raise
            task.uncancel()
            metered.record_failure(SHUTDOWN_STATUS, ServiceUnavailable.code, SHUTTING_DOWN)
            raise ServiceUnavailable(SHUTTING_DOWN) from None
        finally:
            svc.in_flight.discard(task)
        metered.route = route
        metered.first_byte = call.age()  # the whole reply is ready to send
        usage = svc.meter.capped(call, job.usage(found), metered.channel)  # as billed
        response = job.render(found, call, usage)
        if call.content is not None and isinstance(response, web.Response):
            _keep_whole(call.content, response)
        if svc.tracer.on and isinstance(response, web.Response):
            _finished_with(call, response)
        metered.succeed(usage)
        return response


async def stream(request: web.Request, job: StreamJob[B]) -> web.StreamResponse:
    """Admit, route, relay and meter a call whose reply is relayed as it arrives (or
    answered whole, when the job says so once it accepted the model: ``job.whole``)."""
    svc, call = await _admitted(request, job)
    if job.whole is not None:
        return await _whole(request[REPLY_HEADERS], svc, call, job.whole)
    response = _stream_response(job.content_type, request[REPLY_HEADERS])
    task = svc.in_flight.current()
    svc.in_flight.add(task)
    with Metered(svc.meter, call) as metered:
        try:
            # Stages 3 to 5 (written here, not in a helper: a stream's task wakes up once
            # per upstream read, through every coroutine it is in): the first route that
            # starts, each batch in one write (what arrived together leaves together),
            # then the end.
            routes, policy, switching = svc.planner.plan(call, job)
            open_route: Callable[[Route], AbstractAsyncContextManager[Batches[B]]] = (
                switching.open if switching else job.open
            )
            if svc.tracer.on:
                open_route = svc.tracer.attempts(call, open_route)
            failed = _failed(svc, metered)
            async with relay_stream(
                routes, open_route, call.model.spec.name, failed, policy=policy, task=task
            ) as opened:
                route, first, batches = opened
                _answered(svc, route, switching, call, response.headers)
                metered.route = route
                response.headers.update(job.reply_headers)
                note_started(request, response)
                writer = await response.prepare(request)
                metered.first_byte = first_byte = call.age()
                svc.watchers.tell_first_byte(call, first_byte)
                render = job.render
                write = _writer(writer, response, call, job.content_type, svc.tracer.on)
                await write(render(first))  # with the head, even when empty (``_Reply``)
                await (
                    batches.pump(render, write)  # every adapter's: no coroutine a read
                    if isinstance(batches, Translated)
                    else _pump(batches, render, write)
                )
            metered.closing = True
            await response.write_eof(_end(job, call))
            metered.succeed()
        except ParleyError as error:
            await _stream_failed(request, response, job, metered, error)
        except CLIENT_GONE:
            metered.record_failure(CLIENT_CLOSED, None, CALLER_LEFT)
        except asyncio.CancelledError:
            if not await _ended_by_shutdown(request, response, job, metered, task):
                raise
        except Exception:  # the started reply's own error boundary (see the docstring)
            if not response.prepared:
                raise
            log.exception("a stream failed after its reply started (%s)", call.endpoint)
            metered.record_failure(INTERNAL_ERROR, None, INTERNAL_ERROR_MESSAGE)
            await _raise_or_tell(
                request, response, job, metered, ParleyError(INTERNAL_ERROR_MESSAGE)
            )
        finally:
            svc.in_flight.discard(task)
            # billed once the reply started (a translator may count a read before that)
            metered.delivered(job.delivered() if metered.first_byte is not None else None)
    return response


async def _pump(
    batches: Batches[B],
    render: Callable[[Sequence[B]], bytes],
    write: Callable[[bytes], Awaitable[None]],
) -> None:
    """Every batch left, each rendered and written unless it renders empty."""
    async for batch in batches:
        data = render(batch)
        if data:
            await write(data)


async def _admitted(request: web.Request, job: Job) -> tuple[Services, Call]:
    """Stages 1 and 2: the model resolved and accepted, the call admitted. Raises to refuse;
    nothing is metered for a call that was not admitted (the gateway logs the refusal,
    with the model names left in ``REFUSED_MODEL``)."""
    svc = request.app[SERVICES]
    caller = request[CALLER]
    try:
        call = await admitted_call(svc, caller, job, None)
    except _Refused as refused:
        request[REFUSED_MODEL] = (job.model, refused.resolved)
        raise refused.error from None
    request[ADMITTED] = True  # logged by Metered from here on, not as a refusal
    if caller.group.content.policy != "off":  # attribute reads only when it keeps nothing
        _capture(svc, call, request.get(REQUEST_BODY))
    # The caller enters ``Metered`` next, with no await between: it ends the budget hold.
    if svc.tracer.on:
        svc.tracer.begin(call, request.headers)
    # The edge (parley/app.py) adds these to any reply that is not a started stream.
    request[REPLY_HEADERS] = call.reply_headers()
    return svc, call


def _capture(svc: Services, call: Call, body: bytes | None) -> None:
    """Start catching the call's content (its group keeps some)."""
    call.content = svc.contents.capture(call.caller.group.content, body)


def _keep_whole(capture: ContentCapture, response: web.Response) -> None:
    """A whole reply's body for the content log: its bytes (a binary reply's size)."""
    body = response.body
    if isinstance(body, bytes | bytearray):
        capture.whole(body, response.content_type)


def _capturing(
    write: Callable[[bytes], Awaitable[None]], capture: ContentCapture, content_type: str
) -> Callable[[bytes], Awaitable[None]]:
    """``write``, each piece written also handed to ``capture`` (calls that keep content)."""
    capture.stream_opened(content_type)

    async def written(data: bytes) -> None:
        await write(data)
        capture.piece(data)

    return written


def _finished_with(call: Call, response: web.Response) -> None:
    """A traced whole reply's finish reasons (a binary reply has none)."""
    body = response.body
    if isinstance(body, bytes) and response.content_type == "application/json":
        call.finish_reasons = finish_reasons(body)


def _writer(
    writer: AbstractStreamWriter | None,
    response: web.StreamResponse,
    call: Call,
    content_type: str,
    tracing: bool,
) -> Callable[[bytes], Awaitable[None]]:
    """How a stream's pieces are written: to the caller, and also to the call's content
    capture (a group that keeps content) and its finish reasons (a traced call). To the
    caller is to the writer ``prepare`` returned (what ``response.write`` awaits once it
    checked the reply is started and not ended, as it is here: one coroutine a read
    less)."""
    write: Callable[[bytes], Awaitable[None]] = response.write if writer is None else writer.write
    if call.content is not None:
        write = _capturing(write, call.content, content_type)
    if tracing:
        write = _finishing(write, call)
    return write


def _finishing(
    write: Callable[[bytes], Awaitable[None]], call: Call
) -> Callable[[bytes], Awaitable[None]]:
    """``write``, each piece of a traced stream also read for the finish reasons it names
    (with the end of the piece before: an upstream read may cut an event anywhere)."""
    before = b""

    async def written(data: bytes) -> None:
        nonlocal before
        await write(data)
        read = before + data
        call.finish_reasons = finish_reasons(read, call.finish_reasons, after=len(before))
        before = read[-OVERLAP:]

    return written


def _end(job: StreamJob[B], call: Call) -> bytes:
    """The bytes that close a complete stream, handed to its capture too."""
    end = job.end()
    if call.content is not None:
        call.content.piece(end)
    return end


class _Refused(Exception):
    """A call refused before admission, with the public model it resolved to ("")."""

    def __init__(self, error: ParleyError, resolved: str) -> None:
        self.error = error
        self.resolved = resolved


async def admitted_call(
    svc: Services, caller: Caller, job: Job, request_id: str | None, *, batch: bool = False
) -> Call:
    """Stages 1 and 2 for ``caller``: raises ``_Refused`` (for a request) or the refusal
    itself (for a batch line, ``request_id`` given) when the call is not admitted."""
    operation = job.operation
    meter = svc.meter
    resolved = ""
    try:
        model = resolve_model(svc.models, caller, job.model, operation.kinds, operation.name)
        resolved = model.spec.name
        if batch:
            model = batch_priced(model)
        job.accept(model)
        if meter.writer.overloaded:
            raise ServiceUnavailable(OVERLOADED)
        if request_id is None:
            request_id = svc.request_ids.new()
        admission = await admit(
            svc.limiter,
            meter.ledger,
            caller,
            job.reservation(model, caller),
            hold=request_id,
            allowance=job.allowance(model),
            price=model.spec.price,
            release=meter.release,
        )
    except ParleyError as refusal:
        if isinstance(refusal, RateLimited | QuotaExceeded):
            svc.watchers.tell_refusal(caller, refusal)
        if batch:
            raise
        raise _Refused(refusal, resolved) from None
    return Call(request_id, operation.path, caller, model, admission)


async def _ended_by_shutdown(
    request: web.Request,
    response: web.StreamResponse,
    job: StreamJob[B],
    metered: Metered,
    task: asyncio.Task[Any],
) -> bool:
    """A stream cancelled: by shutdown (its reply ended cleanly, ``True``), or by its
    caller leaving (``False``: the cancellation goes on)."""
    if not request.app[SERVICES].in_flight.ending(task):
        metered.record_failure(CLIENT_CLOSED, None, CALLER_LEFT)
        return False
    task.uncancel()
    metered.record_failure(SHUTDOWN_STATUS, ServiceUnavailable.code, SHUTTING_DOWN)
    await _raise_or_tell(request, response, job, metered, ServiceUnavailable(SHUTTING_DOWN))
    return True


class _Reply(web.StreamResponse):
    """A streamed reply whose head leaves with its first bytes, in one write, as aiohttp's
    ``web.Response`` sends its head with its body: the runner writes the first batch as
    soon as the reply is prepared, so the caller waits for nothing more, and one system
    call a stream is saved."""

    _send_headers_immediately = False


def _stream_response(content_type: str, headers: dict[str, str]) -> web.StreamResponse:
    return _Reply(
        headers={
            "Content-Type": content_type,
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            **headers,
        }
    )


async def _stream_failed(
    request: web.Request,
    response: web.StreamResponse,
    job: StreamJob[B],
    metered: Metered,
    error: ParleyError,
) -> None:
    """A stream ended by a ``ParleyError``: an upstream's failure (told to the watchers
    when it cut a started reply), or a refusal."""
    call = metered.call
    route = metered.route
    if isinstance(error, UpstreamError) and response.prepared and route is not None:  # cut
        watchers = request.app[SERVICES].watchers
        watchers.tell_upstream_failed(call, route, error, call.age())
    metered.record_failure(error.status, error.code, error)
    await _raise_or_tell(request, response, job, metered, error)


def _answered(
    svc: Services,
    route: Route,
    switching: Switching | None,
    call: Call,
    headers: MutableMapping[str, str],
) -> None:
    """``route`` answered: its breakers (and the tracer) hear it, and a fallback's model
    becomes the call's."""
    svc.breakers.succeeded(route)
    if svc.tracer.on:
        svc.tracer.answered(call, route)
    if switching is not None:
        switching.answered(call, headers)


def _failed(svc: Services, metered: Metered) -> Failed:
    """Each failed upstream attempt, told to the breakers and the watchers (logs, metrics);
    its channel is the record's until another route answers."""
    call = metered.call

    def failed(route: Route, error: UpstreamError, seconds: float) -> None:
        metered.route = route
        svc.breakers.failed(route, error)
        svc.watchers.tell_upstream_failed(call, route, error, seconds)

    return failed


async def _raise_or_tell(
    request: web.Request,
    response: web.StreamResponse,
    job: StreamJob[Any],
    metered: Metered,
    error: ParleyError,
) -> None:
    """Tell the caller the call failed: raise ``error`` for its envelope while nothing was
    sent, else write it in the stream's own format (``job.failure``), or cut the
    connection when the format has none (``pipeline/started.py``); nothing once the stream's
    end is being written (``metered.closing``)."""
    if not response.prepared:
        raise error
    if metered.closing:
        return
    await end_started_reply(request, response, job.failure(error))


class Metered:
    """How an admitted call ended, recorded once on leaving the ``with`` block.

    Until the runner says otherwise the outcome is a failure: the status of the error
    that left the block (499 for a cancellation, 500 for anything unexpected), so no
    exception can make a call look successful or go unrecorded.
    """

    __slots__ = (
        "_meter",
        "billable",
        "call",
        "closing",
        "error_code",
        "error_detail",
        "first_byte",
        "route",
        "status",
        "usage",
    )

    def __init__(self, meter: Meter, call: Call) -> None:
        self._meter = meter
        self.call = call
        self.status: int | None = None
        self.route: Route | None = None
        """The route that answered, or the last one that failed."""
        self.usage = NO_USAGE
        self.billable: bool | None = None
        self.closing = False
        """A stream's end is being written: a failure now is recorded, not told."""
        self.error_code: str | None = None
        self.error_detail: str | None = None
        """Why it failed, for the request log (``failure_detail``)."""
        self.first_byte: float | None = None
        """Seconds from admission to the reply's first byte (None: nothing was sent)."""

    @property
    def channel(self) -> str:
        """The record's channel: the route's, or none when no route was tried."""
        return self.route.target.channel if self.route is not None else ""

    def succeed(self, usage: Usage | None = None) -> None:
        self.status = OK
        if usage is not None:
            self.usage = usage

    def record_failure(
        self, status: int, code: str | None = None, why: BaseException | str | None = None
    ) -> None:
        """Record a failure, its error code and why (the first one counts). The caller is
        told of it unless the stream's end is being written (``closing``)."""
        if self.status is None:
            self.status = status
            self.error_code = code
            self.error_detail = failure_detail(why)

    def delivered(self, usage: Usage | None) -> None:
        """A stream is billed for what it delivered, whatever its status."""
        self.usage = usage if usage is not None else NO_USAGE
        self.billable = usage is not None

    def __enter__(self) -> Metered:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.status is None:
            self.status = failure_status(error)
            if isinstance(error, ParleyError):
                self.error_code = error.code
            why: BaseException | str = INTERNAL_ERROR_MESSAGE  # never an exception's text
            if isinstance(error, ParleyError):
                why = error
            elif isinstance(error, asyncio.CancelledError):
                why = CALLER_LEFT
            self.error_detail = failure_detail(why)
        call = self.call
        if call.content is not None:  # queued before the meter's observers (the tracer) hear
            call.content.finish(
                request_id=call.request_id,
                group_id=call.caller.group.id,
                endpoint=call.endpoint,
                model=call.model.spec.name,
                status=self.status,
            )
        self._meter.finish(
            self.call,
            usage=self.usage,
            status=self.status,
            channel=self.channel,
            billable=self.billable,
            error_code=self.error_code,
            first_byte=self.first_byte,
            error_detail=self.error_detail,
        )


def failure_status(error: BaseException | None) -> int:
    """The usage record's status for a call that ended by ``error``."""
    if isinstance(error, ParleyError):
        return error.status
    if isinstance(error, asyncio.CancelledError):
        return CLIENT_CLOSED
    return INTERNAL_ERROR
