"""When a budget period ends: the reset a budget 429 names (``x-ratelimit-reset-budget``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import pytest

from parley.runtime.budget import Period, SpendLedger
from parley.store.base import Store


@pytest.mark.parametrize(
    ("period", "now", "seconds"),
    [
        ("month", datetime(2026, 12, 31, 23, 59, 30, tzinfo=UTC), 30.0),  # into a new year
        ("month", datetime(2026, 2, 1, 0, 0, tzinfo=UTC), 28 * 86400.0),
        ("day", datetime(2026, 11, 22, 12, 0, tzinfo=UTC), 12 * 3600.0),
    ],
)
def test_the_period_ends_at_midnight_utc_of_its_next_first_day(
    period: Period, now: datetime, seconds: float
) -> None:
    ledger = SpendLedger(cast(Store, None), period)
    assert ledger.seconds_to_reset(now) == seconds
