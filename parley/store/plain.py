"""What the tables' module and the SQLite usage writer share, without SQLAlchemy: the
host's usage writer (``usage_host.py``) loads ``usage_sqlite`` and none of SQLAlchemy."""

from __future__ import annotations

from datetime import UTC, datetime

ROLLUP_TOTALS = (
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "characters",
    "audio_ms",
    "cost_nanos",
    "cached_tokens",
    "cache_write_tokens",
)
"""The summed columns of ``usage_daily``, in ``DailyUsage`` order."""


def as_utc(value: datetime) -> datetime:
    """The same instant as an aware UTC datetime (naive values are read as UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
