"""Usage reports across groups, from the daily rollups: one shape for the admin API,
the dashboard and ``parley usage report``.

A report is the rollup rows of a date range, optionally for one group, one model or
one key, summed over the dimensions asked for (``day``, ``group``, ``model``, ``key``,
any of them). A report by or of a key reads the per-key rollups.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from multidict import MultiMapping

from parley.domain.pricing import nanos_to_usd
from parley.domain.usage import GroupDailyUsage
from parley.errors import InvalidRequest

DIMENSIONS = ("day", "group", "model", "key")
MAX_RANGE_DAYS = 366
MAX_NAME = 200
COLUMNS = (
    "requests",
    "prompt_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "completion_tokens",
    "total_tokens",
    "characters",
    "audio_seconds",
    "cost_usd",
)


@dataclass(frozen=True, slots=True)
class UsageQuery:
    since: date
    until: date
    """Both days included."""
    group: str | None = None
    model: str | None = None
    by: tuple[str, ...] = ("group", "model")
    key: int | None = None
    """One key's usage only (its id)."""

    @property
    def per_key(self) -> bool:
        """Whether the report reads the per-key rollups."""
        return self.key is not None or "key" in self.by

    @property
    def end(self) -> date:
        """The first day after the range (the store's ranges end exclusively)."""
        return self.until + timedelta(days=1)


def query_from_params(params: MultiMapping[str]) -> UsageQuery:
    """``parse_query`` for a query string (the admin API's, the dashboard's form): ``by``
    may be one comma-separated value, repeated (the form's checkboxes), or both."""
    return parse_query(
        since=params.get("since"),
        until=params.get("until"),
        group=params.get("group"),
        model=params.get("model"),
        by=",".join(params.getall("by", [])) or None,
        key=params.get("key"),
    )


def parse_query(
    *,
    since: str | None,
    until: str | None,
    group: str | None = None,
    model: str | None = None,
    by: str | None = None,
    key: str | None = None,
) -> UsageQuery:
    """Check raw query values (the API's query string, the CLI's options)."""
    today = datetime.now(UTC).date()
    first = _day(since, "since", today.replace(day=1))
    last = _day(until, "until", today)
    if last < first:
        raise InvalidRequest("'until' must not be before 'since'.", param="until")
    if (last - first).days >= MAX_RANGE_DAYS:
        raise InvalidRequest(f"A report spans at most {MAX_RANGE_DAYS} days.", param="since")
    for name, value in (("group", group), ("model", model)):
        if value and (len(value) > MAX_NAME or not value.isprintable()):
            raise InvalidRequest(f"No {name} is named {value!r}.", param=name)
    dimensions = tuple(part.strip() for part in (by or "group,model").split(",") if part.strip())
    unknown = [part for part in dimensions if part not in DIMENSIONS]
    if not dimensions or unknown or len(set(dimensions)) != len(dimensions):
        raise InvalidRequest(
            "'by' is a comma-separated list of day, group, model and key (each at most once).",
            param="by",
        )
    if key and (not key.isdecimal() or len(key) > 10):
        raise InvalidRequest("'key' must be a key's id.", param="key")
    return UsageQuery(
        first, last, group or None, model or None, dimensions, int(key) if key else None
    )


def _day(raw: str | None, name: str, default: date) -> date:
    if not raw:
        return default
    try:
        if len(raw) != 10:
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(
            f"'{name}' must be a date in the form YYYY-MM-DD; got '{raw}'.", param=name
        ) from None


@dataclass(slots=True)
class Totals:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    characters: int = 0
    audio_ms: int = 0
    cost_nanos: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, row: GroupDailyUsage) -> None:
        self.requests += row.requests
        self.prompt_tokens += row.prompt_tokens
        self.cached_tokens += row.cached_tokens
        self.cache_write_tokens += row.cache_write_tokens
        self.completion_tokens += row.completion_tokens
        self.characters += row.characters
        self.audio_ms += row.audio_ms
        self.cost_nanos += row.cost_nanos

    def view(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "characters": self.characters,
            "audio_seconds": self.audio_ms / 1000,
            "cost_usd": nanos_to_usd(self.cost_nanos),
        }


@dataclass(slots=True)
class UsageReport:
    query: UsageQuery
    rows: list[tuple[dict[str, str], Totals]] = field(default_factory=list)
    total: Totals = field(default_factory=Totals)

    def view(self) -> dict[str, Any]:
        return {
            "object": "usage_report",
            "since": self.query.since.isoformat(),
            "until": self.query.until.isoformat(),
            "group": self.query.group,
            "model": self.query.model,
            "key": self.query.key,
            "by": list(self.query.by),
            "data": [{**keys, **totals.view()} for keys, totals in self.rows],
            "total": self.total.view(),
        }

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([*self.query.by, *COLUMNS])
        for keys, totals in self.rows:
            view = totals.view()
            writer.writerow([*(keys[d] for d in self.query.by), *(view[c] for c in COLUMNS)])
        return out.getvalue()


def build_report(
    query: UsageQuery,
    rows: Iterable[GroupDailyUsage],
    group_names: Mapping[int, str],
    key_names: Mapping[int, str] | None = None,
) -> UsageReport:
    """Sum ``rows`` per the query's dimensions; a key is named by its prefix and label."""
    report = UsageReport(query)
    sums: dict[tuple[str, ...], Totals] = {}
    for row in rows:
        if query.key is not None and row.key_id != query.key:
            continue
        keys = _keys(row, query.by, group_names, key_names or {})
        sums.setdefault(keys, Totals()).add(row)
        report.total.add(row)
    report.rows = [(dict(zip(query.by, keys, strict=True)), sums[keys]) for keys in sorted(sums)]
    return report


def _keys(
    row: GroupDailyUsage,
    by: Sequence[str],
    group_names: Mapping[int, str],
    key_names: Mapping[int, str],
) -> tuple[str, ...]:
    key = row.key_id
    values = {
        "day": row.day.isoformat(),
        "group": group_names.get(row.group_id, f"#{row.group_id}"),
        "model": row.model,
        "key": "" if key is None else key_names.get(key, f"key {key}"),
    }
    return tuple(values[dimension] for dimension in by)


def table(report: UsageReport) -> str:
    """The report as aligned text columns, with a total line."""
    header = [*report.query.by, "requests", "tokens", "cost_usd"]
    lines = [[*(keys[d] for d in report.query.by), *_short(totals)] for keys, totals in report.rows]
    lines.append(["total", *([""] * (len(report.query.by) - 1)), *_short(report.total)])
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines, strict=True)]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *lines]
    )


def _short(totals: Totals) -> list[str]:
    view = totals.view()
    return [str(view["requests"]), str(view["total_tokens"]), f"{view['cost_usd']:.6f}"]
