"""Stored responses of the Responses API, written behind the reply and read on demand.

A call with ``store`` hands its finished response to ``keep``, which never waits: the
response waits in memory and a background task writes what has gathered in one
transaction, at most every ``flush_seconds``. So a call that stores pays no database
round trip, and a call that does not store never touches the book. A read (``find``:
``previous_response_id``, ``GET /v1/responses/{id}``) looks in memory first, so a
response is found by the same process the moment its reply was sent, then asks the
database. Everything is by group: another group's response is not found, and neither is
an id that cannot be one (``is_response_id``), which never reaches the database.

A write that fails is tried again with what gathered since; past ``queue_size`` waiting
responses new ones are not kept (logged). At shutdown what waits is written, within the
time left; a stored response is a convenience, not money, so one the database would not
take then is logged and dropped, never spilled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from datetime import UTC, datetime, timedelta

from parley.domain.responses import StoredResponse, is_response_id
from parley.settings import ResponsesSettings
from parley.store.base import ResponseStore, StoreFault, StoreUnavailable

log = logging.getLogger("parley.responses")
RETRY_SECONDS = 1.0


class ResponseBook:
    """The stored responses' write-behind queue and their reads."""

    def __init__(self, store: ResponseStore, settings: ResponsesSettings) -> None:
        self._store = store
        self._settings = settings
        self._waiting: OrderedDict[str, StoredResponse] = OrderedDict()
        """Kept but not yet written, oldest first, by id."""
        self._wake = asyncio.Event()
        self._writing = asyncio.Lock()
        """Held while a batch is written, and by ``delete`` (so a deleted response that
        was being written is deleted after its write, not before)."""
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        """Responses not kept because the queue was full."""

    @property
    def retention(self) -> timedelta:
        return timedelta(days=self._settings.retention_days)

    def expiry(self, created_at: datetime) -> datetime:
        return created_at + self.retention

    def keep(self, response: StoredResponse) -> None:
        """Store ``response``, without waiting: it is written in the background."""
        if len(self._waiting) >= self._settings.queue_size:
            self.dropped += 1
            log.warning(
                "stored responses: %d wait to be written; not storing %s",
                len(self._waiting),
                response.id,
            )
            return
        self._waiting[response.id] = response
        self._wake.set()

    async def find(self, response_id: str, group_id: int) -> StoredResponse | None:
        """The group's response with this id (waiting or written, unexpired), or ``None``."""
        if not is_response_id(response_id):
            return None
        waiting = self._waiting.get(response_id)
        if waiting is not None:
            return waiting if waiting.group_id == group_id else None
        return await self._store.find_response(response_id, group_id)

    async def delete(self, response_id: str, group_id: int) -> bool:
        """Delete the group's response; ``False`` when it has none with this id."""
        if not is_response_id(response_id):
            return False
        waiting = self._waiting.get(response_id)
        if waiting is not None and waiting.group_id == group_id:
            del self._waiting[response_id]
            async with self._writing:  # it may be in a batch being written right now
                await self._store.delete_response(response_id, group_id)
            return True
        async with self._writing:
            return await self._store.delete_response(response_id, group_id)

    async def prune(self) -> int:
        return await self._store.prune_responses()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="parley-responses")

    async def close(self, seconds: float) -> None:
        """Stop the loop and write what waits, within ``seconds``."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if not self._waiting:
            return
        try:
            await asyncio.wait_for(self._flush(), max(seconds, 0.001))
        except (TimeoutError, StoreUnavailable, StoreFault) as error:
            log.warning(
                "stored responses: %d not written at shutdown (%s)",
                len(self._waiting),
                error or "timed out",
            )

    async def flush(self) -> None:
        """Write what waits now (``StoreUnavailable`` or ``StoreFault`` if the store
        refuses; it keeps waiting)."""
        await self._flush()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            try:
                await self._flush()
            except (StoreUnavailable, StoreFault) as error:
                log.warning("stored responses: write failed (%s); will try again", error)
                self._wake.set()
                await asyncio.sleep(RETRY_SECONDS)
                continue
            await asyncio.sleep(self._settings.flush_seconds)

    async def _flush(self) -> None:
        async with self._writing:
            self._wake.clear()
            batch = list(self._waiting.values())
            if not batch:
                return
            await self._store.save_responses(batch)
            for response in batch:
                if self._waiting.get(response.id) is response:
                    del self._waiting[response.id]


def now() -> datetime:
    return datetime.now(UTC)
