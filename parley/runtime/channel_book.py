"""Which channels the gateway routes to: the config file's, and those managed from the
admin surface (kept in the database, credentials sealed).

The book is refreshed with the directory (``Services.refresh``, every
``limits.cache_refresh_seconds``, on every worker and instance): it reads the stored
channels, and when any changed it opens their credentials and hands the new set to
``Services``, which swaps in a new ``Router`` (the request path only ever reads the
router it holds, never the database). A stored channel named like one of the config
file's is ignored (the file wins), as is one whose credential no configured key opens
or whose type no adapter serves (any more); each is logged, naming the channel only.

Breaker transitions are kept as the channel's history: the breakers' listener queues
them here (no I/O on the request path) and ``flush`` writes them with the refresh.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from pydantic import ValidationError

from parley.credentials import CredentialBox, SealError
from parley.domain.channels import ChannelEvent, StoredChannel
from parley.runtime.circuit import Transition
from parley.settings import ChannelSettings
from parley.store.base import ChannelStore

log = logging.getLogger("parley.channels")
MAX_QUEUED_EVENTS = 1000
"""Transitions waiting to be written; past it the oldest are dropped (and counted)."""


def stored_settings(stored: StoredChannel, box: CredentialBox) -> ChannelSettings:
    """The stored channel as the router takes it, its credential opened. Raises
    ``SealError`` or pydantic's ``ValidationError``."""
    api_key = None
    if stored.api_key_sealed is not None:
        api_key = box.open(stored.api_key_sealed, stored.name)
    return ChannelSettings.model_validate({**stored.spec, "name": stored.name, "api_key": api_key})


class ChannelBook:
    def __init__(
        self,
        configured: Sequence[ChannelSettings],
        box: CredentialBox,
        types: frozenset[str] | None = None,
    ) -> None:
        self.configured = tuple(configured)
        self.box = box
        self._types = types
        """The channel types an adapter serves (``None``: every type is taken)."""
        self.stored: list[StoredChannel] = []
        self.active: tuple[ChannelSettings, ...] = self.configured
        """The channels routed to: the config file's, then the enabled stored ones."""
        self._seen: tuple[tuple[str, datetime], ...] | None = None
        self._events: deque[ChannelEvent] = deque(maxlen=MAX_QUEUED_EVENTS)
        self.events_dropped = 0

    async def load(self, store: ChannelStore) -> bool:
        """Read the stored channels; True when they changed since the last load."""
        stored = await store.list_channels()
        seen = tuple((channel.name, channel.updated_at) for channel in stored)
        if seen == self._seen:
            return False
        self._seen, self.stored = seen, stored
        self.active = self.configured + tuple(self._usable(stored))
        return True

    def _usable(self, stored: list[StoredChannel]) -> list[ChannelSettings]:
        names = {channel.name for channel in self.configured}
        usable: list[ChannelSettings] = []
        for channel in stored:
            if channel.disabled_at is not None:
                continue
            if channel.name in names:
                log.warning("stored channel %s is ignored: the config file has one", channel.name)
                continue
            if self._types is not None and channel.spec.get("type") not in self._types:
                log.warning(
                    "stored channel %s is not served: no adapter for its type", channel.name
                )
                continue
            try:
                usable.append(stored_settings(channel, self.box))
            except SealError as error:
                log.warning("stored channel %s is not served: %s", channel.name, error)
            except ValidationError:
                log.warning(
                    "stored channel %s is not served: its settings are invalid", channel.name
                )
        return usable

    def is_configured(self, name: str) -> bool:
        return any(channel.name == name for channel in self.configured)

    def find(self, name: str) -> ChannelSettings | None:
        """An active channel by name (a disabled one is not)."""
        return next((channel for channel in self.active if channel.name == name), None)

    def transition(self, change: Transition) -> None:
        """A breaker listener: queue this instance's own transitions for the history."""
        if change.remote:
            return
        if len(self._events) == self._events.maxlen:
            self.events_dropped += 1
        self._events.append(
            ChannelEvent(
                channel=change.channel,
                model=change.model,
                kind="breaker",
                state=change.state.name.lower(),
                message=change.error,
                actor="breaker",
                created_at=datetime.now(UTC),
            )
        )

    async def flush(self, store: ChannelStore) -> None:
        """Write the queued transitions (kept for the next flush if the store fails).

        The queue is emptied before the write, so a flush that runs meanwhile (the
        refresh loop's and an explicit ``Services.refresh``) writes only what came after,
        never the same transitions twice."""
        if not self._events:
            return
        events = list(self._events)
        self._events.clear()
        try:
            await store.record_channel_events(events)
        except BaseException:
            self._requeue(events)
            raise

    def _requeue(self, events: list[ChannelEvent]) -> None:
        """Put unwritten ``events`` back before those queued since, oldest dropped past
        the bound, as ``transition`` drops them."""
        waiting = events + list(self._events)
        dropped = max(0, len(waiting) - MAX_QUEUED_EVENTS)
        self.events_dropped += dropped
        self._events.clear()
        self._events.extend(waiting[dropped:])


async def reseal_all(store: ChannelStore, box: CredentialBox) -> int:
    """Seal every stored credential with the first key (opened with any); how many.
    Raises ``SealError`` naming a channel no key opens, before anything is written."""
    stored = [channel for channel in await store.list_channels() if channel.api_key_sealed]
    resealed = [
        replace(channel, api_key_sealed=box.reseal(channel.api_key_sealed or "", channel.name))
        for channel in stored
    ]
    now = datetime.now(UTC)
    for channel in resealed:
        await store.replace_channel(replace(channel, updated_at=now))
    return len(resealed)
