"""The usage record ``Meter.finish`` builds holds each of the call's values in its own
field: it is built positionally (docs/performance.md, Speed habits), so a value put in
its neighbour's place would still type-check."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from parley.domain.groups import Group
from parley.domain.keys import KeyRecord
from parley.domain.models import ModelSpec, Resolved
from parley.domain.pricing import Price
from parley.domain.usage import Allowance, Usage, UsageRecord
from parley.limits.memory import MemoryLimiter
from parley.pipeline.admit import Admission
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.meter import BackgroundTasks, Meter
from parley.runtime.budget import SpendLedger
from parley.runtime.writer import UsageWriter
from parley.settings import UsageSettings
from parley.store.sql import open_store


async def test_each_value_lands_in_its_own_field(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'p.db'}")
    await store.migrate()
    ledger = SpendLedger(store, "month")
    meter = Meter(
        UsageWriter(store, ledger, UsageSettings()), ledger, MemoryLimiter(), BackgroundTasks()
    )
    key = KeyRecord(
        9, 4, "k", "d" * 64, "pk-current", datetime.now(UTC), former_prefixes=("pk-old",)
    )
    price = Price(input_per_1k=1_000_000, output_per_1k=3_000_000, per_1k_characters=5_000_000)
    call = Call(
        "req_1",
        "/v1/chat/completions",
        Caller(key, Group(4, "g")),
        Resolved(ModelSpec("m", "chat", price), "m-alias", deprecated=False),
        Admission(scopes=(), reserved_tokens=0, allowance=Allowance(1_000, 1_000, 1_000, 1_000)),
    )
    usage = Usage(
        prompt_tokens=30,
        completion_tokens=50,
        characters=70,
        audio_ms=110,
        estimated=True,
        cached_tokens=20,
        cache_write_tokens=10,
    )
    record = meter.finish(
        call,
        usage=usage,
        status=299,
        channel="chan",
        error_code="code",
        first_byte=0.25,
        error_detail="why",
    )
    expected = UsageRecord(
        request_id="req_1",
        created_at=record.created_at,
        group_id=4,
        key_id=9,
        model="m",
        channel="chan",
        endpoint="/v1/chat/completions",
        status=299,
        latency_ms=record.latency_ms,
        prompt_tokens=30,
        completion_tokens=50,
        characters=70,
        audio_ms=110,
        cost_nanos=price.cost(
            prompt_tokens=30,
            completion_tokens=50,
            characters=70,
            audio_ms=110,
            cached_tokens=20,
            cache_write_tokens=10,
        ),
        estimated=True,
        cached_tokens=20,
        cache_write_tokens=10,
        model_requested="m-alias",
        error_code="code",
        first_byte_ms=250,
        admitted=True,
        key_prefix="pk-current",
        error_detail="why",
        price=price.tag,
    )
    assert record == expected
    previous = replace(call, caller=Caller(key, Group(4, "g"), previous_secret=True))
    again = meter.finish(previous, usage=usage, status=200, channel="chan")
    assert again.key_prefix == "pk-old"  # the secret the call came with, not the key's now
    assert record.cost_nanos > 0
    await store.close()
