"""Deleting a clone's copy on its engine, retried until the engine says it is gone.

A clone deleted in Parley leaves the registry at once (``CloneBook.retire``: no caller
lists or uses it again) and becomes a row of ``voice_deletions``. Its deleter (the
caller's ``DELETE``, or the operator's) makes the first attempt at the engine right away
(``attempt``). When an attempt fails (an error, a timeout, the channel gone or
disabled), the row keeps the count of failed attempts, the error with every credential
removed, and when to try next: ``clone_deletion_retry_seconds`` after the first
failure, doubled after each further one, at most ``clone_deletion_retry_max_seconds``
(``domain.voices.deletion_delay``). ``run`` is the background loop that makes the later
attempts, never on a caller's path; the rows are in the database, so a restart carries
on where the last process stopped. An operator sees the rows, tries one again at once,
or gives it up (``AdminService``).

Several workers or instances: each attempt starts by claiming its row
(``claim_deletion``: the row's ``next_attempt_at`` moved ``CLAIM_SECONDS`` ahead while it
is still due), which only one of them wins; a claim whose worker died runs out and the
row is taken over. An engine that no longer has the voice (a 404) counts as done, so
even two attempts at once (an operator's retry beside the loop's) do no harm. An engine
name that a live clone on the same channel holds again is never deleted: the row is
dropped instead (the engine holds one voice of that name, and it is the live clone's).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from parley.domain.voices import Clone, PendingDeletion, deletion_delay, folded
from parley.errors import UpstreamError, UpstreamRefused
from parley.providers.base import VOICES, Target
from parley.providers.redaction import redact
from parley.providers.registry import ProviderRegistry, UnknownProviderType
from parley.store.base import StoreFault, StoreUnavailable, VoiceStore

log = logging.getLogger("parley.voices")

CLAIM_SECONDS = 300.0
"""How long a claimed deletion is held for its attempt: longer than any attempt takes
(an engine call within its channel's timeouts), so no second attempt starts meanwhile."""
MAX_ERROR_CHARS = 500


@dataclass(frozen=True, slots=True)
class Located:
    """Where a clone's channel is reached now: its adapter's type and its target."""

    provider_type: str
    target: Target


Locate = Callable[[str, str], Located | None]
"""(model, channel) → where that channel serves that model now, or ``None`` when it no
longer does (removed from the configuration, or disabled)."""
Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class DeletionTiming:
    first: float = 30.0
    """Seconds from a first failed attempt to the next."""
    longest: float = 3600.0
    """The most seconds between two attempts."""
    scan: float = 5.0
    """Seconds between two looks at the rows for attempts that are due."""


def _now() -> datetime:
    return datetime.now(UTC)


class CloneDeletions:
    """The deletions still to do on the engines: one ``attempt`` at a time, ``run`` in
    the background, and running counts for ``/metrics``."""

    def __init__(
        self,
        store: VoiceStore,
        providers: ProviderRegistry,
        locate: Locate,
        timing: DeletionTiming,
        *,
        clock: Clock = _now,
    ) -> None:
        self._store = store
        self._providers = providers
        self._locate = locate
        self._timing = timing
        self.clock = clock
        """What "now" is to the deletions (when one is due, when it failed): the wall
        clock, or a test's."""
        self.deleted = 0
        """Engine copies deleted (or found already gone) by this process."""
        self.failed = 0
        """Failed attempts made by this process."""
        self.pending: int | None = None
        """Deletions still to do (every process's), as of this process's last look."""

    def claimed_until(self, now: datetime) -> datetime:
        return now + timedelta(seconds=CLAIM_SECONDS)

    async def run(self) -> None:
        while True:
            try:
                await self.sweep()
            except (StoreUnavailable, StoreFault) as error:
                log.warning("clone deletions: the store did not answer (%s); trying later", error)
            await asyncio.sleep(self._timing.scan)

    async def sweep(self) -> int:
        """Attempt every deletion that is due and that this process claims; how many."""
        rows = await self._store.list_deletions()
        self.pending = left = len(rows)
        attempted = 0
        for row in rows:
            now = self.clock()  # an attempt may have taken a while
            if row.next_attempt_at > now:
                continue
            claimed = await self._store.claim_deletion(
                row.id, now, self.claimed_until(now), due=True
            )
            if claimed is None:
                continue  # another worker or instance has it
            attempted += 1
            if await self.attempt(claimed) is None:
                left -= 1
        self.pending = left
        return attempted

    async def retry_now(self, deletion_id: int) -> PendingDeletion | None:
        """An operator's attempt, due or not; the row after it (``None``: done). Raises
        ``LookupError`` when there is no such deletion."""
        now = self.clock()
        claimed = await self._store.claim_deletion(
            deletion_id, now, self.claimed_until(now), due=False
        )
        if claimed is None:
            raise LookupError(deletion_id)
        return await self.attempt(claimed)

    async def attempt(self, pending: PendingDeletion) -> PendingDeletion | None:
        """One attempt at a claimed deletion: the row after it, ``None`` when the engine
        no longer holds the voice (the row is then gone)."""
        failure = await self._engine_delete(pending)
        if failure is None:
            await self._store.finish_deletion(pending.id)
            self.deleted += 1
            return None
        self.failed += 1
        at = self.clock()
        attempts = pending.attempts + 1
        wait = deletion_delay(attempts, self._timing.first, self._timing.longest)
        log.warning(
            "voice deletion %s (%s): attempt %d at the engine of channel `%s` failed (%s); "
            "trying again in %gs",
            pending.voice_id,
            pending.model,
            attempts,
            pending.channel,
            failure,
            wait,
        )
        after = at + timedelta(seconds=wait)
        return await self._store.deletion_failed(pending.id, failure, at, after)

    async def _engine_delete(self, pending: PendingDeletion) -> str | None:
        """``None`` once the engine no longer holds the voice; else what went wrong,
        every credential removed."""
        if _held_again(pending, await self._store.list_clones(model=pending.model)):
            return None
        located = self._locate(pending.model, pending.channel)
        if located is None:
            return (
                f"The channel `{pending.channel}` does not serve the model `{pending.model}` "
                "now (removed from the configuration, or disabled)."
            )
        try:
            adapter = self._providers.serving(VOICES, located.provider_type)
        except UnknownProviderType:
            return f"Channels of type `{located.provider_type}` do not manage voices."
        try:
            await adapter.delete_voice(located.target, pending.engine_name)
        except UpstreamError as error:
            return _described(error, located.target.api_key)
        return None


def _held_again(pending: PendingDeletion, live: list[Clone]) -> bool:
    """Whether a live clone on the deletion's channel holds its engine name again."""
    name = folded(pending.engine_name)
    return any(c.channel == pending.channel and folded(c.engine_name) == name for c in live)


def _described(error: UpstreamError, api_key: str | None) -> str:
    """The failure as an operator reads it: the engine's status and own message where
    it sent one, with every credential removed (the channel's key in any spelling)."""
    text = error.message
    if isinstance(error, UpstreamRefused):
        text = f"HTTP {error.upstream_status}: {error.detail or error.message}"
    return redact(text, api_key)[:MAX_ERROR_CHARS]
