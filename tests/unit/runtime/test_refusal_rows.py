"""Which refusals are request-log lines of their own: the first ``ROWS_PER_MINUTE`` of a
key, status and code in a minute, and one more line that counts the rest, written when
the minute is over (or at shutdown); the counts add up to every refusal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

from parley.domain.usage import UsageRecord
from parley.runtime.budget import SpendLedger
from parley.runtime.refusal_rows import ROWS_PER_MINUTE, RefusalRows
from parley.runtime.writer import UsageWriter
from parley.settings import UsageSettings
from parley.store.base import Store
from tests.records import usage_record

MINUTE = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def refusal(
    number: int, at: datetime, key_id: int = 1, code: str = "rate_limit_exceeded"
) -> UsageRecord:
    record = usage_record(f"x{number:05d}", created_at=at, key_id=key_id, prompt=0, completion=0)
    return replace(record, status=429, error_code=code, admitted=False, cost_nanos=0)


def test_past_the_first_rows_a_minute_refusals_are_counted_on_one_line() -> None:
    rows = RefusalRows()
    admitted = [rows.admit(refusal(n, MINUTE + timedelta(seconds=n % 60))) for n in range(1000)]
    assert admitted == [True] * ROWS_PER_MINUTE + [False] * (1000 - ROWS_PER_MINUTE)
    assert rows.ended(MINUTE.timestamp() + 59) == []  # the minute is not over
    (line,) = rows.ended(MINUTE.timestamp() + 60)
    assert line.request_id == f"x{ROWS_PER_MINUTE:05d}"  # the first of the rest
    assert line.request_count == 1000 - ROWS_PER_MINUTE and not line.admitted
    assert rows.ended(MINUTE.timestamp() + 120) == []  # written once


def test_each_key_code_and_minute_has_its_own_rows() -> None:
    rows = RefusalRows()
    kinds = [(1, "rate_limit_exceeded"), (2, "rate_limit_exceeded"), (1, "insufficient_quota")]
    for minute in range(2):
        for key_id, code in kinds:
            for n in range(ROWS_PER_MINUTE + 5):
                at = MINUTE + timedelta(minutes=minute)
                assert rows.admit(refusal(n, at, key_id, code)) == (n < ROWS_PER_MINUTE)
    first = rows.ended(MINUTE.timestamp() + 60)
    assert sorted((line.key_id, line.error_code) for line in first) == sorted(kinds)
    assert {line.request_count for line in first} == {5}
    assert len(rows.all()) == 3  # the current minute's, at shutdown
    assert rows.all() == []


def test_a_minute_without_a_rest_line_is_simply_forgotten() -> None:
    rows = RefusalRows()
    assert all(rows.admit(refusal(n, MINUTE)) for n in range(ROWS_PER_MINUTE))
    assert rows.ended(MINUTE.timestamp() + 60) == []
    assert rows.admit(refusal(99, MINUTE + timedelta(minutes=1)))


class KeptStore:
    def __init__(self) -> None:
        self.records: list[UsageRecord] = []

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        self.records += records
        return len(records)


async def test_the_writer_writes_the_rest_line_at_shutdown(tmp_path: Path) -> None:
    store = KeptStore()
    settings = UsageSettings(spill_dir=str(tmp_path))
    writer = UsageWriter(cast(Store, store), SpendLedger(cast(Store, store), "month"), settings)
    now = datetime.now(UTC)
    for n in range(500):
        writer.submit_refusal(refusal(n, now))
    assert writer.backlog <= ROWS_PER_MINUTE
    await writer.close()
    assert len(store.records) == ROWS_PER_MINUTE + 1  # all of one minute
    assert sum(record.request_count for record in store.records) == 500
