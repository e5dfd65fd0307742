"""Stored responses of the Responses API, written behind the reply and read on demand.

A call with ``store`` hands its finished response to ``keep``, which never waits: the
response waits in memory and a background task writes what has gathered in one
transaction, at most every ``flush_seconds``. So a call that stores pays no database
round trip, and a call that does not store never touches the book. A read (``find``,
``GET /v1/responses/{id}``; ``turns``, ``previous_response_id``) looks in memory first, so
a response is found by the same process the moment its reply was sent, then asks the
database. Everything is by group: another group's response is not found, and neither is
an id that cannot be one (``is_response_id``), which never reaches the database.

A write that fails is tried again with what gathered since. The caller of a stored
response has its id, so one is never dropped: past ``queue_size`` waiting responses the
book is ``overloaded`` and new calls that would store are refused (503) until it drains.
At shutdown what waits is written within the time left; what the database has not
confirmed by then (down, hung, a write still in flight) is spilled to
``parley-responses-spill-<pid>.jsonl`` (``pipeline/spill.py``) and written at the next
start. A response is written at most once whatever is replayed: the store ignores an
id it already has.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import OrderedDict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from parley.domain.responses import TURNS_PER_COPY, StoredResponse, is_response_id
from parley.runtime.spill import SpillFiles, finish_within
from parley.settings import ResponsesSettings
from parley.store.base import ResponseStore, StoreFault, StoreUnavailable

log = logging.getLogger("parley.responses")
RETRY_SECONDS = 1.0
SPILL_STEM = "parley-responses-spill"


class ResponseBook:
    """The stored responses' write-behind queue and their reads."""

    def __init__(
        self, store: ResponseStore, settings: ResponsesSettings, spill_dir: str | Path
    ) -> None:
        self._store = store
        self._settings = settings
        self._spills = SpillFiles(spill_dir, SPILL_STEM)
        self._waiting: OrderedDict[str, StoredResponse] = OrderedDict()
        """Kept but not yet written, oldest first, by id."""
        self._wake = asyncio.Event()
        self._writing = asyncio.Lock()
        """Held while a batch is written, and by ``delete`` (so a deleted response that
        was being written is deleted after its write, not before)."""
        self._task: asyncio.Task[None] | None = None

    @property
    def retention(self) -> timedelta:
        return timedelta(days=self._settings.retention_days)

    def expiry(self, created_at: datetime) -> datetime:
        return created_at + self.retention

    @property
    def overloaded(self) -> bool:
        """``queue_size`` responses or more wait to be written: a call that would store
        one more should wait (the calls already under way still keep theirs)."""
        return len(self._waiting) >= self._settings.queue_size

    def keep(self, response: StoredResponse) -> None:
        """Store ``response``, without waiting: it is written in the background."""
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

    async def turns(self, response_id: str, group_id: int) -> list[StoredResponse]:
        """The group's response with this id and the turns it continues, newest first (at
        most ``TURNS_PER_COPY``); ``[]`` when it has none. Those waiting are taken from
        memory, the rest in one read."""
        if not is_response_id(response_id):
            return []
        found: list[StoredResponse] = []
        wanted: str | None = response_id
        while wanted is not None and len(found) < TURNS_PER_COPY:
            waiting = self._waiting.get(wanted)
            if waiting is None:
                most = TURNS_PER_COPY - len(found)
                return found + await self._store.find_turns(wanted, group_id, most)
            if waiting.group_id != group_id:
                break
            found.append(waiting)
            wanted = waiting.previous_response_id
        return found

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

    async def replay_spills(self) -> None:
        """Write the responses spilled at an earlier shutdown (at start, before serving)."""
        for path, count in await self._spills.replay(self._replay):
            log.info("replayed %d spilled stored responses from %s", count, path)

    async def _replay(self, rows: list[dict[str, Any]]) -> bool:
        try:
            await self._store.save_responses([_response(row) for row in rows])
        except (StoreUnavailable, StoreFault) as error:
            log.error("stored responses: spilled ones not replayed (%s); kept for later", error)
            return False
        return True

    async def close(self, seconds: float) -> None:
        """Stop the loop and write what waits, within ``seconds``; spill what the store
        has not confirmed by then (a write in flight included: a replay adds nothing
        twice)."""
        finished = await finish_within(self._finish(), lambda: self._task, max(seconds, 0.001))
        if finished is None:
            self._task = None
            log.error("stored responses: the database did not answer within %.2fs", seconds)
        elif (refusal := finished.result()) is not None:
            log.error("stored responses: the database refused the last write (%s)", refusal)
        self._spill()

    async def _finish(self) -> StoreUnavailable | StoreFault | None:
        """Stop the loop and write what waits; the store's refusal, if it refused."""
        if self._task is not None:
            # Never cut a write in progress: SQLite would stay locked for this one.
            async with self._writing:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self._flush()
        except (StoreUnavailable, StoreFault) as error:
            return error
        return None

    def _spill(self) -> None:
        if not self._waiting:
            return
        rows = (dataclasses.asdict(response) for response in self._waiting.values())
        path = self._spills.keep(rows)
        log.error(
            "database unreachable at shutdown: %d stored responses kept in %s",
            len(self._waiting),
            path,
        )
        self._waiting.clear()

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


def _response(row: dict[str, Any]) -> StoredResponse:
    """A spilled response read back (its times were written in ISO 8601)."""
    for name in ("created_at", "expires_at"):
        row[name] = datetime.fromisoformat(row[name])
    return StoredResponse(**row)
