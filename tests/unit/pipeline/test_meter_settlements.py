"""Limiter corrections from calls that finish in the same tick are applied together."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from parley.domain.groups import Group, Quota
from parley.domain.keys import KeyRecord
from parley.domain.models import ModelSpec, Resolved
from parley.domain.pricing import Price
from parley.domain.usage import Allowance, Usage
from parley.limits.base import Decision, Scope
from parley.limits.memory import MemoryLimiter
from parley.pipeline.admit import Admission
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.meter import BackgroundTasks, Meter
from parley.runtime.budget import SpendLedger
from parley.runtime.writer import UsageWriter
from parley.settings import UsageSettings
from parley.store.sql import open_store

GROUP = Scope("g:1", Quota(tpm=10_000))
KEY = Scope("k:1", Quota(tpm=500))


class RecordingLimiter:
    def __init__(self) -> None:
        self.settled: list[tuple[tuple[str, ...], int]] = []

    async def acquire(self, scopes: Sequence[Scope], tokens: int) -> Decision:
        return Decision(allowed=True)

    async def settle(self, scopes: Sequence[Scope], delta_tokens: int) -> None:
        self.settled.append((tuple(scope.name for scope in scopes), delta_tokens))

    async def peek(self, scopes: Sequence[Scope]) -> Decision:
        return Decision(allowed=True)

    async def close(self) -> None:
        return None


def call(scopes: tuple[Scope, ...], reserved: int, number: int, price: Price | None = None) -> Call:
    from datetime import UTC, datetime

    key = KeyRecord(1, 1, "k", "d" * 64, "pk-", datetime.now(UTC))
    model = ModelSpec("m", "chat", price or Price())
    return Call(
        f"req_{number}",
        "/v1/chat/completions",
        Caller(key, Group(1, "g")),
        Resolved(model, "m", deprecated=False),
        Admission(scopes=scopes, reserved_tokens=reserved, allowance=Allowance(10, 10)),
    )


async def test_one_tick_of_corrections_is_one_settle_per_scope_set(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    limiter, tasks = RecordingLimiter(), BackgroundTasks()
    ledger = SpendLedger(store, "month")
    meter = Meter(UsageWriter(store, ledger, UsageSettings()), ledger, limiter, tasks)
    used = Usage(prompt_tokens=5, completion_tokens=5)
    meter.finish(call((GROUP,), 100, 1), usage=used, status=200, channel="c")
    meter.finish(call((GROUP,), 50, 2), usage=used, status=200, channel="c")
    meter.finish(call((GROUP, KEY), 30, 3), usage=used, status=200, channel="c")
    meter.finish(call((GROUP,), 10, 4), usage=used, status=200, channel="c")  # exact: no-op
    await tasks.drain(seconds=5)
    assert sorted(limiter.settled) == [(("g:1",), -130), (("g:1", "k:1"), -20)]
    meter.finish(call((GROUP,), 0, 5), usage=used, status=200, channel="c")
    await tasks.drain(seconds=5)
    assert limiter.settled[-1] == (("g:1",), 10)
    await store.close()


async def test_a_cost_is_never_negative(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    ledger = SpendLedger(store, "month")
    meter = Meter(
        UsageWriter(store, ledger, UsageSettings()), ledger, RecordingLimiter(), BackgroundTasks()
    )
    misconfigured = Price(input_per_1k=-1_000_000)
    record = meter.finish(
        call((GROUP,), 10, 1, misconfigured),
        usage=Usage(prompt_tokens=5, completion_tokens=5),
        status=200,
        channel="c",
    )
    assert record.cost_nanos == 0
    assert ledger.spent(1) == 0
    await store.close()


async def test_an_in_process_limiter_is_corrected_as_the_call_ends(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    limiter, tasks = MemoryLimiter(clock=lambda: 100.0), BackgroundTasks()
    ledger = SpendLedger(store, "month")
    meter = Meter(UsageWriter(store, ledger, UsageSettings()), ledger, limiter, tasks)
    await limiter.acquire((GROUP,), 1_000)
    meter.finish(
        call((GROUP,), 1_000, 1),
        usage=Usage(prompt_tokens=5, completion_tokens=5),
        status=200,
        channel="c",
    )
    assert not tasks._tasks, "nothing left for a later tick"
    tokens = (await limiter.peek((GROUP,))).tokens
    assert tokens is not None and tokens.remaining == 10_000 - 10
    await store.close()
