"""The batch lane: runs the lines of every batch in progress, in the serving process.

Each line is a call like any other (``runner.batch_line``): the same admission, routing,
failover, breakers and metering, at the model's batch price, as the batch's key. The
lane yields to interactive traffic:

- at most ``batches.concurrency`` lines in flight in all, and the lane's share of one
  channel (the first of the model's routes whose breakers are closed): at most
  ``batches.per_channel``, halved when the channel's interactive calls are answered 429
  or slow down, grown back a line at a time when they don't (``api/batch_share.py``),
  so the rest of each channel is left to interactive calls;
- a batch's lines start only while more than ``batches.rate_reserve`` of its group's
  and key's rates is left, so its group's own interactive calls keep that share;
- a model none of whose routes has its breakers closed, or whose line was refused by the
  group's rates (429, before it was sent) or answered 429 by its upstream, waits
  ``batches.backoff_seconds`` before its next line is started.

Never twice: a lane takes a queued line (``claimed``, its own), then records it
``sent`` (its own committed transaction) before its call starts; only a line it claimed
of a batch in progress can be. A line found ``sent`` by a dead lane (see below) may have
reached its upstream: it is never sent again, and goes to the error file as
``interrupted`` (billed as the request log knows it). Cancelling a batch stops new
lines at once (``mark_sent`` refuses them); so does its expiry, which sends its unsent
lines to the error file as ``batch_expired``. A batch ends once no line of it is taken
or in flight on any instance: one lane (``take_batch``) writes its results (an output
and an error file in OpenAI's ``BatchRequestOutput`` shape; Anthropic's Message Batches
keep theirs in their lines, ``api/batch_results.py``).

Scaled out: every instance with ``batches.enabled`` runs a lane on the shared
PostgreSQL database. Each lane holds a lease (``batch_lanes``) that it renews every
third of ``batches.lease_seconds``; lanes take lines with ``SELECT ... FOR UPDATE SKIP
LOCKED``, so they share every batch's lines whoever created it. When a lane's lease
runs out (its instance died), the others put the lines it had claimed back in the
queue, send those it had sent to the error file as ``interrupted``, and end its
batches. With SQLite one instance runs the lane, and a lane that starts takes every
earlier lane for dead at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import orjson
from aiohttp import web

from parley.api.batch_lines import line_job
from parley.api.batch_results import Outcome, results_of
from parley.api.batch_share import LaneShare
from parley.domain.batches import (
    CANCELLED,
    CANCELLING,
    CLAIMED,
    COMPLETED,
    DONE,
    EXPIRED,
    FINALIZING,
    IN_PROGRESS,
    LINE_FAILED,
    QUEUED,
    SENT,
    Batch,
    BatchLine,
    line_request_id,
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
NO_KEY = "The batch's API key or group is no longer usable."
LEASE_END_SECONDS = 0.5
"""How long closing waits for the database to end the lane's lease: a shutdown's time is
the usage records' (a lease the database did not end expires by itself)."""


class BatchLane:
    """The background task that runs batch lines, and the lines it has in flight."""

    def __init__(self, svc: Services) -> None:
        self._svc = svc
        self._settings = svc.settings.batches
        self._id = f"lane_{secrets.token_hex(12)}"
        """This lane's lease: the owner of the lines it takes."""
        self._shared = svc.settings.database.url.startswith("postgres")
        """Whether other instances' lanes may run on the same database."""
        settings = self._settings
        self.share = LaneShare(
            settings.per_channel,
            settings.grow_seconds,
            settings.slowdown,
            adaptive=settings.adaptive,
        )
        """Each channel's share of lines in flight (``per_channel`` when not adaptive)."""
        self._running: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._on_channel: Counter[str] = Counter()
        self._paused: dict[str, float] = {}
        """Models whose lines wait, until when (``time.monotonic``)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._lease: asyncio.Task[None] | None = None
        self._started = False
        self.queued = 0
        """Lines waiting in the batches in progress, at the lane's last look (``/metrics``)."""

    def start(self) -> None:
        if self._settings.enabled:
            if self._settings.adaptive:  # interactive calls tell the share how they fare
                self._svc.meter.observers.append(self.share.observe)
                self._svc.watchers.upstream_failed.append(self.share.upstream_failed)
            self._started = True
            self._task = asyncio.create_task(self._run(), name="parley-batch-lane")

    def in_flight_by_channel(self) -> dict[str, int]:
        """Lines in flight on each channel the lane has used (``/metrics``)."""
        return {channel or "none": count for channel, count in self._on_channel.items()}

    def wake(self) -> None:
        """Look for work now (a batch was created or cancelled)."""
        self._wake.set()

    async def stop(self) -> None:
        """Start no more lines (the gateway is shutting down); those in flight go on
        (and the lease with them, until ``close``)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def close(self, seconds: float) -> None:
        """Stop starting lines; give those in flight ``seconds`` to end, then cancel them
        (they stay ``sent``: ``interrupted``), and end the lane's lease, so what it still
        holds is the other lanes' (or the next start's) at once."""
        await self.stop()
        running = list(self._running.values())
        if running:
            _, late = await asyncio.wait(running, timeout=seconds)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if self._lease is not None:
            self._lease.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lease
            self._lease = None
        if self._started:  # worth a moment, not the usage records' time: it expires anyway
            try:
                async with asyncio.timeout(LEASE_END_SECONDS):
                    await self._svc.store.drop_batch_lanes(self._id, others=False)
            except (StoreUnavailable, StoreFault) as error:
                log.warning("batch lane: could not end its lease (%s)", error)
            except TimeoutError:
                log.warning(
                    "batch lane: the database did not end its lease within %gs; it ends "
                    "by itself %gs after its last renewal",
                    LEASE_END_SECONDS,
                    self._svc.settings.batches.lease_seconds,
                )

    async def _run(self) -> None:
        store = self._svc.store
        third = self._settings.lease_seconds / 3
        while True:
            try:
                if not self._shared:  # one instance runs the lane: earlier ones are gone
                    await store.drop_batch_lanes(self._id, others=True)
                await store.beat_batch_lane(self._id, self._settings.lease_seconds)
                break
            except (StoreUnavailable, StoreFault) as error:
                log.warning("batch lane: could not start (%s); will try again", error)
                await asyncio.sleep(self._settings.poll_seconds)
        if self._lease is None:
            self._lease = asyncio.create_task(self._renew(third), name="parley-batch-lease")
        reclaim_at = 0.0
        while True:
            busy = False
            try:
                if time.monotonic() >= reclaim_at:
                    await self._reclaim()
                    reclaim_at = time.monotonic() + third
                busy = await self._step()
            except (StoreUnavailable, StoreFault) as error:
                log.warning("batch lane: %s; will try again", error)
            if not busy:
                self._wake.clear()
                wait = min(self._settings.poll_seconds, max(0.0, reclaim_at - time.monotonic()))
                # ``asyncio.timeout``, not ``wait_for``: in Python 3.11 ``wait_for`` returns
                # a wake-up that came in the same turn as ``stop``'s cancellation and drops
                # the cancellation, and the lane never stopped.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wake.wait()

    async def _renew(self, every: float) -> None:
        """Renew the lane's lease every ``every`` seconds, on its own task, so a long
        step (a large batch's files being written) never lets it run out; it runs
        until ``close``, while the lines in flight end."""
        while True:
            await asyncio.sleep(every)
            try:
                await self._svc.store.beat_batch_lane(self._id, self._settings.lease_seconds)
            except (StoreUnavailable, StoreFault) as error:
                log.warning("batch lane: could not renew its lease (%s)", error)

    async def _reclaim(self) -> None:
        """What no running lane holds any more: lines a dead lane claimed go back to the
        queue; lines it sent (or this lane sent and could not end: their result never
        reached the database) may have reached their upstream, so they go to the error
        file as ``interrupted`` and are never sent again."""
        store = self._svc.store
        for batch in await store.runnable_batches():
            results = results_of(batch)
            await store.requeue_orphan_lines(batch.id, self._id)
            stale = [
                item.line
                for item in await store.batch_lines(batch.id, CLAIMED, most=PAGE)
                if item.owner == self._id and (batch.id, item.line) not in self._running
            ]
            if stale:
                await store.release_batch_lines(batch.id, stale, self._id, from_state=CLAIMED)
            lost = [
                item
                for item in await store.batch_lines(batch.id, SENT, most=PAGE)
                if item.owner == self._id and (batch.id, item.line) not in self._running
            ]
            lost += await store.orphan_batch_lines(batch.id, SENT, self._id, most=PAGE)
            if lost:
                outcomes = [results.interrupted(batch, item) for item in lost]
                ended = await store.finish_batch_lines(batch.id, outcomes, from_state=SENT)
                log.warning("batch %s: %d lines interrupted (their lane stopped)", batch.id, ended)

    async def _step(self) -> bool:
        """One look at every running batch; whether anything was started or ended."""
        busy = False
        runnable = await self._svc.store.runnable_batches()
        counts = await self._svc.store.batch_line_counts_of([batch.id for batch in runnable])
        self.queued = sum(states.get(QUEUED, 0) for states in counts.values())
        for batch in runnable:
            busy = await self._advance(batch) or busy
        return busy

    async def _advance(self, batch: Batch) -> bool:
        store = self._svc.store
        if batch.status == IN_PROGRESS and datetime.now(UTC) >= batch.expires_at:
            expired = await self._expire_unsent(batch)
            if self._in_flight(batch.id) or await self._elsewhere(batch):
                return expired  # it ends once its lines in flight have
            return await self._finalize(batch, EXPIRED) or expired
        if batch.status == IN_PROGRESS and await self._start_lines(batch):
            return True
        if self._in_flight(batch.id) or await self._elsewhere(batch):
            return False
        if batch.status == CANCELLING:
            return await self._finalize(batch, CANCELLED)
        counts = await store.batch_line_counts(batch.id)
        if batch.status == FINALIZING or not counts.get(QUEUED, 0):
            return await self._finalize(batch, COMPLETED)
        return False

    def _in_flight(self, batch_id: str) -> bool:
        return any(key[0] == batch_id for key in self._running)

    async def _elsewhere(self, batch: Batch) -> bool:
        """Whether a line of the batch is taken or in flight on another lane (it ends
        there, or is reclaimed once that lane's lease runs out)."""
        counts = await self._svc.store.batch_line_counts(batch.id)
        return bool(counts.get(SENT, 0) or counts.get(CLAIMED, 0))

    async def _start_lines(self, batch: Batch) -> bool:
        room = self._settings.concurrency - len(self._running)
        headroom = await self._rate_headroom(batch)
        if headroom is not None:
            room = min(room, headroom)
        if room <= 0:
            return False
        store = self._svc.store
        claimed = await store.claim_batch_lines(batch.id, self._id, most=room)
        unused: list[int] = []
        for item in claimed:
            channel = self._channel_for(_model_of(item))
            full = len(self._running) >= self._settings.concurrency
            if full or channel is None or self._on_channel[channel] >= self.share.limit(channel):
                unused.append(item.line)
                continue
            self._on_channel[channel] += 1
            task = asyncio.create_task(self._run_line(batch, item, channel))
            self._running[(batch.id, item.line)] = task
        if unused:  # left for later, or for another lane
            await store.release_batch_lines(batch.id, unused, self._id, from_state=CLAIMED)
        return len(unused) < len(claimed)

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
            if not await store.mark_line_sent(batch.id, item.line, self._id):
                # cancelled or expired meanwhile: never sent, back for the cancel to end
                await store.release_batch_lines(batch.id, [item.line], self._id, from_state=CLAIMED)
                return
            outcome = await self._call(batch, item)
            if outcome is None:
                await store.release_batch_lines(batch.id, [item.line], self._id, from_state=SENT)
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
        the lane's next reclaim sends to the error file as ``interrupted``."""
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
        results = results_of(batch)
        try:
            job = await line_job(batch.endpoint, item.body, svc, batch.group_id)
            caller = self._caller(batch)
            kept = item.body.encode() if caller.group.content.on else None  # content log's
            reply = await batch_line(svc, caller, job, line_request_id(batch.id, item.line), kept)
        except NotAdmitted as refused:
            if isinstance(refused.error, RateLimited | ServiceUnavailable):
                self._pause(model)
                return None
            return results.refused(batch, item, refused.error)
        except ParleyError as error:
            if error.status == RateLimited.status:
                self._pause(model)
            return results.refused(batch, item, error)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: the line fails, the lane goes on
            log.exception("batch %s line %d failed", batch.id, item.line)
            return results.refused(batch, item, ParleyError(INTERNAL_ERROR_MESSAGE))
        body = reply.body if isinstance(reply, web.Response) else None
        raw = bytes(body) if isinstance(body, bytes | bytearray) else b"null"
        return results.answered(batch, item, reply.status, raw)

    def _caller(self, batch: Batch) -> Caller:
        directory = self._svc.directory
        key = directory.key(batch.key_id)
        group = directory.group(batch.group_id)
        if key is None or group is None:
            raise _NoCaller(NO_KEY)
        caller = Caller(key, group)
        check_usable(caller)
        return caller

    async def _expire_unsent(self, batch: Batch) -> bool:
        """End the batch's queued lines as expired; whether it had any."""
        return await self._end_queued(batch, results_of(batch).expired)

    async def _end_queued(self, batch: Batch, end: _Ending) -> bool:
        store = self._svc.store
        had = False
        while queued := await store.batch_lines(batch.id, QUEUED, most=PAGE):
            had = True
            outcomes = [end(batch, item) for item in queued]
            await store.finish_batch_lines(batch.id, outcomes, from_state=QUEUED)
        return had

    async def _finalize(self, batch: Batch, status: str) -> bool:
        """End the batch, unless another live lane is ending it: a cancelled one's
        queued lines are cancelled, an OpenAI batch's output and error files written,
        then it gets its last status. Whether this lane ended it."""
        store = self._svc.store
        if not await store.take_batch(batch.id, self._id):
            return False
        results = results_of(batch)
        if status == CANCELLED:
            await self._end_queued(batch, results.cancelled)
        if status == COMPLETED:
            await store.set_batch_status(batch.id, FINALIZING, only_from=(IN_PROGRESS,))
        output = errors = None
        if results.files:
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
        return True

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


_Ending = Callable[[Batch, BatchLine], Outcome]
"""How a line that was never sent ends (expired, cancelled)."""


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
