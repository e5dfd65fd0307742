"""The batch lane: runs the lines of every batch in progress, in the serving process.

Each line is a call like any other (``runner.batch_line``): the same admission, routing,
failover, breakers and metering, at the model's batch price, as the batch's key. The
lane yields to interactive traffic:

- at most ``batches.concurrency`` lines in flight in all, and ``batches.per_channel`` on
  one channel (the first of the model's routes whose breakers are closed), so the rest
  of each channel is left to interactive calls;
- a batch's lines start only while more than ``batches.rate_reserve`` of its group's
  and key's rates is left, so its group's own interactive calls keep that share;
- a model none of whose routes has its breakers closed, or whose line was refused by the
  group's rates (429, before it was sent) or answered 429 by its upstream, waits
  ``batches.backoff_seconds`` before its next line is started.

Never twice: a line is recorded ``sent`` (its own committed transaction) before its call
starts, and only a queued line of a batch in progress can be. A line found ``sent`` when
the lane starts (the process stopped or died while it ran) may have reached its
upstream: it is never sent again, and goes to the error file as ``interrupted`` (billed
as the request log knows it). Cancelling a batch stops new lines at once (``mark_sent``
refuses them); so does its expiry, which sends its unsent lines to the error file as
``batch_expired``. A batch ends once no line of it is in flight: its results are written
as an output file (the lines answered 2xx) and an error file (the rest), in OpenAI's
``BatchRequestOutput`` shape.

One instance runs the lane (``batches.enabled``): with several instances on one
PostgreSQL database, leave it on for one only (sharing the work is not built yet).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import orjson
from aiohttp import web

from parley.api.batch_lines import line_job
from parley.api.reply import error_response
from parley.domain.batches import (
    CANCELLED,
    CANCELLING,
    COMPLETED,
    DONE,
    EXPIRED,
    FINALIZING,
    IN_PROGRESS,
    LINE_CANCELLED,
    LINE_FAILED,
    QUEUED,
    SENT,
    Batch,
    BatchLine,
    error_line,
    line_request_id,
    output_line,
)
from parley.domain.files import BATCH_OUTPUT, StoredFile, new_file_id
from parley.errors import INTERNAL_ERROR_MESSAGE, ParleyError, RateLimited, ServiceUnavailable
from parley.pipeline.admit import scopes_for
from parley.pipeline.authenticate import Caller, check_usable
from parley.pipeline.runner import NotAdmitted, batch_line
from parley.pipeline.services import Services
from parley.runtime.circuit import State
from parley.store.base import StoreFault, StoreUnavailable

log = logging.getLogger("parley.batches")
PAGE = 1000
KEEP_TRIES = 5
"""How many times a line's result is offered to the database before it is given up."""
INTERRUPTED = "The gateway stopped while this line was in flight; it is not sent again."
EXPIRED_LINE = "This line was not run before the batch expired."
NO_KEY = "The batch's API key or group is no longer usable."
Outcome = tuple[int, str, str | None]
"""A line's end: its number, its state, its result line."""


class BatchLane:
    """The background task that runs batch lines, and the lines it has in flight."""

    def __init__(self, svc: Services) -> None:
        self._svc = svc
        self._settings = svc.settings.batches
        self._running: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._on_channel: Counter[str] = Counter()
        self._paused: dict[str, float] = {}
        """Models whose lines wait, until when (``time.monotonic``)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._settings.enabled:
            self._task = asyncio.create_task(self._run(), name="parley-batch-lane")

    def in_flight_by_channel(self) -> dict[str, int]:
        """Lines in flight on each channel the lane has used (``/metrics``)."""
        return {channel or "none": count for channel, count in self._on_channel.items()}

    def wake(self) -> None:
        """Look for work now (a batch was created or cancelled)."""
        self._wake.set()

    async def stop(self) -> None:
        """Start no more lines (the gateway is shutting down); those in flight go on."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def close(self, seconds: float) -> None:
        """Stop starting lines; give those in flight ``seconds`` to end, then cancel them
        (they stay ``sent``: ``interrupted`` at the next start)."""
        await self.stop()
        running = list(self._running.values())
        if running:
            _, late = await asyncio.wait(running, timeout=seconds)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)

    async def _run(self) -> None:
        while True:
            try:
                await self._recover()
                break
            except (StoreUnavailable, StoreFault) as error:
                log.warning("batch lane: recovery failed (%s); will try again", error)
                await asyncio.sleep(self._settings.poll_seconds)
        while True:
            busy = False
            try:
                busy = await self._step()
            except (StoreUnavailable, StoreFault) as error:
                log.warning("batch lane: %s; will try again", error)
            if not busy:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._settings.poll_seconds)

    async def _recover(self) -> None:
        """Every line left ``sent`` by an earlier process goes to the error file as
        ``interrupted``: it may have reached its upstream, so it is never sent again."""
        store = self._svc.store
        for batch in await store.runnable_batches():
            while sent := await store.batch_lines(batch.id, SENT, most=PAGE):
                outcomes: list[Outcome] = [
                    (
                        item.line,
                        LINE_FAILED,
                        error_line(batch.id, item.line, item.custom_id, "interrupted", INTERRUPTED),
                    )
                    for item in sent
                ]
                await store.finish_batch_lines(batch.id, outcomes, from_state=SENT)
                log.warning("batch %s: %d lines interrupted by a restart", batch.id, len(sent))

    async def _step(self) -> bool:
        """One look at every running batch; whether anything was started or ended."""
        busy = False
        for batch in await self._svc.store.runnable_batches():
            busy = await self._advance(batch) or busy
        return busy

    async def _advance(self, batch: Batch) -> bool:
        store = self._svc.store
        if batch.status == IN_PROGRESS and datetime.now(UTC) >= batch.expires_at:
            expired = await self._expire_unsent(batch)
            if self._in_flight(batch.id):
                return expired  # it ends once its lines in flight have
            await self._finalize(batch, EXPIRED)
            return True
        if batch.status == IN_PROGRESS and await self._start_lines(batch):
            return True
        if self._in_flight(batch.id):
            return False
        counts = await store.batch_line_counts(batch.id)
        if counts.get(SENT, 0):
            return False  # sent by another process: its lines end there
        if batch.status == CANCELLING:
            await self._cancel_unsent(batch)
            await self._finalize(batch, CANCELLED)
            return True
        if batch.status == FINALIZING or not counts.get(QUEUED, 0):
            await self._finalize(batch, COMPLETED)
            return True
        return False

    def _in_flight(self, batch_id: str) -> bool:
        return any(key[0] == batch_id for key in self._running)

    async def _start_lines(self, batch: Batch) -> bool:
        room = self._settings.concurrency - len(self._running)
        headroom = await self._rate_headroom(batch)
        if headroom is not None:
            room = min(room, headroom)
        if room <= 0:
            return False
        taken = sum(1 for key in self._running if key[0] == batch.id)
        queued = await self._svc.store.batch_lines(batch.id, QUEUED, most=room + taken)
        started = False
        for item in queued:
            if len(self._running) >= self._settings.concurrency:
                break
            key = (batch.id, item.line)
            if key in self._running:
                continue
            channel = self._channel_for(_model_of(item))
            if channel is None or self._on_channel[channel] >= self._settings.per_channel:
                continue
            self._on_channel[channel] += 1
            task = asyncio.create_task(self._run_line(batch, item, channel))
            self._running[key] = task
            started = True
        return started

    async def _rate_headroom(self, batch: Batch) -> int | None:
        """How many more lines of the batch may start without taking the share of its
        group's and key's rates left to interactive calls (``batches.rate_reserve``):
        the requests left past that share, less the batch's lines in flight (which
        have taken theirs, or are about to); 0 while the tokens left are within it.
        ``None``: no bound (no rates, or the limiter cannot say)."""
        reserve = self._settings.rate_reserve
        key = self._svc.directory.key(batch.key_id)
        group = self._svc.directory.group(batch.group_id)
        if not reserve or key is None or group is None:
            return None
        try:
            decision = await self._svc.limiter.peek(scopes_for(Caller(key, group)))
        except ParleyError:
            return None
        tokens = decision.tokens
        if tokens is not None and tokens.remaining <= tokens.limit * reserve:
            return 0
        requests = decision.requests
        if requests is None:
            return None
        running = sum(1 for batch_id, _ in self._running if batch_id == batch.id)
        return int(requests.remaining - requests.limit * reserve) - running

    def _channel_for(self, model: str) -> str | None:
        """The channel a line of ``model`` would go to first: the first of its routes
        whose breakers are closed; ``""`` for a model no channel serves (its line fails
        as an interactive call would); ``None`` while it waits (backing off, or no
        route's breakers closed)."""
        svc = self._svc
        if self._paused.get(model, 0.0) > time.monotonic():
            return None
        resolved = svc.models.resolve(model)
        if resolved is None:
            return ""
        routes = svc.router.routes(resolved.spec.name)
        if not routes:
            return ""
        for route in routes:
            shut = [svc.breakers.find(key) for key in (route.target.channel, route.breaker_key)]
            if all(breaker is None or breaker.state == State.CLOSED for breaker in shut):
                return route.target.channel
        self._pause(model)
        return None

    def _pause(self, model: str) -> None:
        self._paused[model] = time.monotonic() + self._settings.backoff_seconds

    async def _run_line(self, batch: Batch, item: BatchLine, channel: str) -> None:
        store = self._svc.store
        try:
            if not await store.mark_line_sent(batch.id, item.line):
                return  # cancelled or expired meanwhile: never sent
            outcome = await self._call(batch, item)
            if outcome is None:
                await store.requeue_line(batch.id, item.line)
            else:
                await self._keep(batch, outcome)
        except (StoreUnavailable, StoreFault) as error:
            log.warning("batch %s line %d: %s", batch.id, item.line, error)
        finally:
            self._on_channel[channel] -= 1
            self._running.pop((batch.id, item.line), None)
            self._wake.set()

    async def _keep(self, batch: Batch, outcome: Outcome) -> None:
        """Write a line's result, trying again while the database is away (up to
        ``KEEP_TRIES`` times): a result it never takes leaves the line ``sent``, which
        the next start sends to the error file as ``interrupted``."""
        for attempt in range(1, KEEP_TRIES + 1):
            try:
                await self._svc.store.finish_batch_lines(batch.id, [outcome], from_state=SENT)
                return
            except (StoreUnavailable, StoreFault):
                if attempt == KEEP_TRIES:
                    raise
                await asyncio.sleep(self._settings.poll_seconds * attempt)

    async def _call(self, batch: Batch, item: BatchLine) -> Outcome | None:
        """The line's call and its end; ``None`` when it was refused before it was sent
        and should wait (a rate, the gateway busy)."""
        svc = self._svc
        model = _model_of(item)
        try:
            job = await line_job(batch.endpoint, item.body, svc, batch.group_id)
            caller = self._caller(batch)
            kept = item.body.encode() if caller.group.content.on else None  # content log's
            reply = await batch_line(svc, caller, job, line_request_id(batch.id, item.line), kept)
        except NotAdmitted as refused:
            if isinstance(refused.error, RateLimited | ServiceUnavailable):
                self._pause(model)
                return None
            return self._failed(batch, item, refused.error)
        except ParleyError as error:
            if error.status == RateLimited.status:
                self._pause(model)
            return self._failed(batch, item, error)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: the line fails, the lane goes on
            log.exception("batch %s line %d failed", batch.id, item.line)
            return self._failed(batch, item, ParleyError(INTERNAL_ERROR_MESSAGE))
        body = reply.body if isinstance(reply, web.Response) else None
        raw = bytes(body) if isinstance(body, bytes | bytearray) else b"null"
        state = DONE if reply.status < 300 else LINE_FAILED
        result = output_line(batch.id, item.line, item.custom_id, reply.status, raw)
        return item.line, state, result

    def _caller(self, batch: Batch) -> Caller:
        directory = self._svc.directory
        key = directory.key(batch.key_id)
        group = directory.group(batch.group_id)
        if key is None or group is None:
            raise _NoCaller(NO_KEY)
        caller = Caller(key, group)
        check_usable(caller)
        return caller

    def _failed(self, batch: Batch, item: BatchLine, error: ParleyError) -> Outcome:
        body = error_response(error).body
        raw = bytes(body) if isinstance(body, bytes | bytearray) else b"null"
        result = output_line(batch.id, item.line, item.custom_id, error.status, raw)
        return item.line, LINE_FAILED, result

    async def _expire_unsent(self, batch: Batch) -> bool:
        """Send the batch's queued lines to the error file as expired; whether it had any."""
        store = self._svc.store
        had = False
        while queued := await store.batch_lines(batch.id, QUEUED, most=PAGE):
            had = True
            outcomes: list[Outcome] = [
                (
                    item.line,
                    LINE_FAILED,
                    error_line(batch.id, item.line, item.custom_id, "batch_expired", EXPIRED_LINE),
                )
                for item in queued
            ]
            await store.finish_batch_lines(batch.id, outcomes, from_state=QUEUED)
        return had

    async def _cancel_unsent(self, batch: Batch) -> None:
        store = self._svc.store
        while queued := await store.batch_lines(batch.id, QUEUED, most=PAGE):
            outcomes: list[Outcome] = [(item.line, LINE_CANCELLED, None) for item in queued]
            await store.finish_batch_lines(batch.id, outcomes, from_state=QUEUED)

    async def _finalize(self, batch: Batch, status: str) -> None:
        """Write the output and error files, then give the batch its last status."""
        store = self._svc.store
        if status == COMPLETED:
            await store.set_batch_status(batch.id, FINALIZING, only_from=(IN_PROGRESS,))
        output = await self._results_file(batch, DONE, "output")
        errors = await self._results_file(batch, LINE_FAILED, "error")
        await store.set_batch_status(
            batch.id,
            status,
            only_from=(FINALIZING, IN_PROGRESS, CANCELLING),
            output_file_id=output,
            error_file_id=errors,
        )
        log.info("batch %s %s", batch.id, status)

    async def _results_file(self, batch: Batch, state: str, kind: str) -> str | None:
        store = self._svc.store
        if not await store.batch_results(batch.id, state, after=0, most=1):
            return None
        file_id = new_file_id()
        size = await self._svc.file_bytes.write(file_id, self._results(batch.id, state))
        await store.add_file(
            StoredFile(
                id=file_id,
                group_id=batch.group_id,
                filename=f"{batch.id}_{kind}.jsonl",
                purpose=BATCH_OUTPUT,
                bytes=size,
                created_at=datetime.now(UTC),
            )
        )
        return file_id

    async def _results(self, batch_id: str, state: str) -> AsyncIterator[bytes]:
        after = 0
        while page := await self._svc.store.batch_results(batch_id, state, after=after, most=PAGE):
            yield "".join(f"{result}\n" for _, result in page).encode()
            after = page[-1][0]


class _NoCaller(ParleyError):
    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


def _model_of(item: BatchLine) -> str:
    """The model a line names (checked when its batch was accepted)."""
    try:
        model = orjson.loads(item.body).get("model")
    except (orjson.JSONDecodeError, AttributeError):
        return ""
    return model if isinstance(model, str) else ""


BATCH_LANE = web.AppKey("batch_lane", BatchLane)
"""The app's batch lane: the batches API wakes it when a batch is created or cancelled."""
