"""The channel book's queue of breaker transitions, written to the history by ``flush``:
each transition once, whatever flushes run at the same time or fail."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from parley.credentials import CredentialBox, new_key
from parley.domain.channels import ChannelEvent
from parley.runtime import channel_book
from parley.runtime.channel_book import ChannelBook
from parley.runtime.circuit import State, Transition


class SlowHistory:
    """A store's ``record_channel_events`` that takes a while, and can be made to fail."""

    def __init__(self) -> None:
        self.written: list[ChannelEvent] = []
        self.failing = False
        self.writing = asyncio.Event()
        self.release = asyncio.Event()

    async def record_channel_events(self, events: Sequence[ChannelEvent]) -> None:
        self.writing.set()
        await self.release.wait()
        if self.failing:
            raise ConnectionError("the database went away")
        self.written.extend(events)


def opened(model: str) -> Transition:
    return Transition(f"spare:{model}", "spare", model, State.OPEN, 0.0, "status 500")


def book() -> ChannelBook:
    return ChannelBook([], CredentialBox([new_key()]))


async def test_flushes_at_the_same_time_write_each_transition_once() -> None:
    channels, history = book(), SlowHistory()
    channels.transition(opened("a"))
    first = asyncio.create_task(channels.flush(history))  # type: ignore[arg-type]
    await history.writing.wait()
    channels.transition(opened("b"))  # arrives while the first write is under way
    second = asyncio.create_task(channels.flush(history))  # type: ignore[arg-type]
    history.release.set()
    await asyncio.gather(first, second)  # the second wrote only what came after the first
    assert sorted(event.model for event in history.written) == ["a", "b"]
    await channels.flush(history)  # type: ignore[arg-type]
    assert len(history.written) == 2


async def fail_a_flush(channels: ChannelBook, history: SlowHistory, meanwhile: str) -> None:
    """A flush whose write fails, with a transition (to ``meanwhile``) queued during it."""
    history.failing = True
    flushing = asyncio.create_task(channels.flush(history))  # type: ignore[arg-type]
    await history.writing.wait()
    channels.transition(opened(meanwhile))
    history.release.set()
    with pytest.raises(ConnectionError):
        await flushing
    history.failing = False


async def test_a_failed_write_keeps_its_transitions_first_for_the_next_flush() -> None:
    channels, history = book(), SlowHistory()
    channels.transition(opened("a"))
    await fail_a_flush(channels, history, "b")
    await channels.flush(history)  # type: ignore[arg-type]
    assert [event.model for event in history.written] == ["a", "b"]


async def test_requeued_transitions_past_the_bound_drop_the_oldest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(channel_book, "MAX_QUEUED_EVENTS", 2)
    channels, history = book(), SlowHistory()
    channels.transition(opened("a"))
    channels.transition(opened("b"))
    await fail_a_flush(channels, history, "c")
    assert channels.events_dropped == 1
    await channels.flush(history)  # type: ignore[arg-type]
    assert [event.model for event in history.written] == ["b", "c"]
