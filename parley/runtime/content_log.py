"""The content log: calls' content, kept as each group's policy says, written behind
the reply and bounded.

The request path hands a finished call's ``ContentCapture`` to ``finished`` (through
``ContentCapture.finish``, at the end of the call's metering), which
queues it without waiting, or, when ``content.queue_size`` captures already wait,
drops it and counts it (``dropped["queue_full"]``, ``parley_content_dropped_total`` on
``/metrics``): a slow database costs a tenant some of its content log, never a call's
time. A loop takes the queue in batches (when one fills, and at least every
``flush_seconds``), turns each capture into its document in a worker thread (parsing,
assembling a stream's text, masking, sealing: the CPU work stays off the event loop),
and writes the batch in one transaction. A batch the database refuses is dropped and
counted (``write_failed``): content is never spilled to disk, where it would lie
unsealed. Content whose policy keeps text is sealed with the channel-credential keys
(``admin.secret_keys``); with none configured it is dropped and counted (``no_key``),
never stored in the clear.

A second loop purges content past its group's retention every ``purge_every_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import orjson

from parley.credentials import CredentialBox
from parley.domain.content import ContentLogging, StoredContent
from parley.runtime.content_capture import ContentCapture, PreparedContent
from parley.runtime.content_document import document
from parley.settings import ContentSettings
from parley.store.base import ContentStore, StoreError

log = logging.getLogger("parley.content")
PURGE_ROUND = 1000
"""Rows deleted by one statement of a purge; rounds follow while a round was full."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Finished:
    """A finished call's capture, and what its usage record says of the call."""

    capture: ContentCapture
    request_id: str
    group_id: int
    endpoint: str
    model: str
    status: int
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


class ContentLog:
    def __init__(self, store: ContentStore, box: CredentialBox, settings: ContentSettings) -> None:
        self._store = store
        self._box = box
        self._settings = settings
        self._queue: deque[_Finished] = deque()
        self._wake = asyncio.Event()
        self._flushing = asyncio.Lock()
        self._loops: list[asyncio.Task[None]] = []
        self.written = 0
        self.dropped: Counter[str] = Counter()
        """Captures not stored, by reason: ``queue_full``, ``no_key``, ``write_failed``."""

    @property
    def can_seal(self) -> bool:
        """A secret key is set: content that keeps text can be stored."""
        return self._box.ready

    @property
    def backlog(self) -> int:
        return len(self._queue)

    def capture(self, logging: ContentLogging, request: bytes | None) -> ContentCapture:
        """A capture for a call of a group that keeps content (``logging.on``)."""
        return ContentCapture(logging, request, self._settings.max_bytes, self.finished)

    def finished(
        self,
        capture: ContentCapture,
        *,
        request_id: str,
        group_id: int,
        endpoint: str,
        model: str,
        status: int,
    ) -> None:
        """Queue a finished call's capture, or drop it and count why; never waits."""
        if capture.logging.keeps_text and not self._box.ready:
            self._drop(capture, "no_key")
            return
        if len(self._queue) >= self._settings.queue_size:
            self._drop(capture, "queue_full")
            return
        capture.queued = True
        self._queue.append(
            _Finished(
                capture=capture,
                request_id=request_id,
                group_id=group_id,
                endpoint=endpoint,
                model=model,
                status=status,
            )
        )
        if len(self._queue) >= self._settings.batch_size:
            self._wake.set()

    def _drop(self, capture: ContentCapture, reason: str) -> None:
        self.dropped[reason] += 1
        capture.tell(None)

    def start(self) -> None:
        self._loops = [
            asyncio.create_task(self._run(), name="parley-content-log"),
            asyncio.create_task(self._purge_loop(), name="parley-content-purge"),
        ]

    async def close(self, seconds: float) -> None:
        """Stop the loops and write what waits, within ``seconds``; what is left then
        (a database that does not answer) is dropped and counted, its listeners told.

        A write or purge in progress is waited for (within the time), not cut: a
        statement cut midway would leave SQLite locked for the usage records."""
        clock = asyncio.get_running_loop().time
        deadline = clock() + max(seconds, 0.001)
        held = False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(deadline):
                await self._flushing.acquire()
            held = True
        for loop in self._loops:
            loop.cancel()
        if held:
            self._flushing.release()
        for loop in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        self._loops = []
        if held:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(deadline):
                    await self.flush()
        while self._queue:
            self._drop(self._queue.popleft().capture, "shutdown")

    async def flush(self) -> None:
        """Write every queued capture (or drop a batch the database refuses). A batch
        leaves the queue once written: a flush cut short (the shutdown's time) leaves it
        there, for ``close`` to count."""
        async with self._flushing:
            while self._queue:
                count = min(self._settings.batch_size, len(self._queue))
                await self._write([self._queue[index] for index in range(count)])
                for _ in range(count):
                    self._queue.popleft()

    async def _run(self) -> None:
        while True:
            # ``asyncio.timeout``, not ``wait_for``: on Python 3.11 a cancellation that
            # meets the timer in ``wait_for`` can be lost, and the loop would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.flush_seconds):
                    await self._wake.wait()
            self._wake.clear()
            await self.flush()

    async def _write(self, batch: list[_Finished]) -> None:
        try:
            rows, prepared = await asyncio.to_thread(self._rows, batch)
        except Exception:  # a bug in reading one capture must not stop the log
            log.exception("content of %d calls could not be prepared", len(batch))
            for item in batch:
                self._drop(item.capture, "failed")
            return
        for item, ready in zip(batch, prepared, strict=True):
            item.capture.tell(ready)
        try:
            self.written += await self._store.save_contents(rows)
        except StoreError as error:
            log.error("content of %d calls was not written (%s); dropped", len(rows), error)
            self.dropped["write_failed"] += len(rows)

    def _rows(self, batch: list[_Finished]) -> tuple[list[StoredContent], list[PreparedContent]]:
        """The stored rows of ``batch`` and what each capture became (worker thread)."""
        rows: list[StoredContent] = []
        prepared: list[PreparedContent] = []
        for item in batch:
            capture = item.capture
            body, ready = document(
                capture, endpoint=item.endpoint, model=item.model, status=item.status
            )
            text = orjson.dumps(body).decode()
            sealed = capture.logging.keeps_text
            days = capture.logging.retention_days
            rows.append(
                StoredContent(
                    request_id=item.request_id,
                    group_id=item.group_id,
                    policy=capture.logging.policy,
                    sealed=sealed,
                    body=self._box.seal(text) if sealed else text,
                    created_at=item.created_at,
                    expires_at=item.created_at + timedelta(days=days),
                )
            )
            prepared.append(ready)
        return rows, prepared

    async def purge(self) -> int:
        """Delete the content past its retention; how many rows."""
        purged = 0
        while True:
            # One round at a time under the writer's lock, which ``close`` takes before it
            # cancels the loops: a DELETE cut midway would leave SQLite locked.
            async with self._flushing:
                count = await self._store.purge_contents(PURGE_ROUND)
            purged += count
            if count < PURGE_ROUND:
                return purged

    async def _purge_loop(self) -> None:
        while True:
            try:
                purged = await self.purge()
            except StoreError as error:
                log.error("expired content could not be purged (%s); will retry", error)
            else:
                if purged:
                    log.info("purged the content of %d calls past its retention", purged)
            await asyncio.sleep(self._settings.purge_every_seconds)

    def opened(self, content: StoredContent) -> dict[str, object]:
        """A stored row's document, opened (the admin surface's; raises ``SealError``)."""
        what = f"the content of {content.request_id}"
        text = self._box.open_sealed(content.body, what) if content.sealed else content.body
        found: dict[str, object] = orjson.loads(text)
        return found
