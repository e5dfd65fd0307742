"""The legacy billing endpoints: quota, usage (OpenAI's shape) and subscription (one-api's).

Only the caller's group is ever visible. Usage is read from the daily rollups, so it is
fast however many raw records are kept. Before reading, the answering instance writes
the usage records it has queued, so a call is in the usage read right after it, as it is
in the quota's budget (read your writes); a call another instance answered is in it once
that instance's writer has written it (``usage.flush_seconds``).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from aiohttp import web

from parley.api.reply import json_reply
from parley.domain.pricing import nanos_to_cents, nanos_to_usd
from parley.domain.usage import DailyUsage
from parley.errors import InvalidRequest
from parley.limits.base import Window
from parley.limits.headers import go_duration
from parley.pipeline.admit import scopes_for
from parley.pipeline.context import caller, services
from parley.runtime.budget import next_period_start, period_start

MAX_RANGE_DAYS = 366
UNLIMITED_USD = 100_000_000.0
"""What one-api reports as a hard limit when there is none; clients subtract from it."""


def _window(window: Window | None) -> dict[str, Any] | None:
    if window is None:
        return None
    return {
        "limit": window.limit,
        "remaining": window.remaining,
        "reset": go_duration(window.reset_seconds),
        "reset_seconds": round(window.reset_seconds, 3),
    }


def _budget(request: web.Request, *, of_key: bool = False) -> dict[str, Any]:
    """The group's budget this period, or (``of_key``) the key's own on top of it."""
    svc, who = services(request), caller(request)
    now = datetime.now(UTC)
    period = svc.meter.ledger.period
    if of_key:
        spent, limit = svc.meter.ledger.key_spent(who.key.id), who.key.budget_nanos
    else:
        spent, limit = svc.meter.ledger.spent(who.group.id), who.group.budget_nanos
    return {
        "period": period,
        "period_start": period_start(period, now).isoformat(),
        "period_end": next_period_start(period, now).isoformat(),
        "limit_usd": nanos_to_usd(limit) if limit is not None else None,
        "spent_usd": nanos_to_usd(spent),
        "remaining_usd": nanos_to_usd(max(0, limit - spent)) if limit is not None else None,
    }


async def quota(request: web.Request) -> web.Response:
    svc, who = services(request), caller(request)
    decision = await svc.limiter.peek(scopes_for(who))
    payload = {
        "object": "billing_quota",
        "group": who.group.name,
        "rpm": who.key.quota.rpm or who.group.quota.rpm,
        "tpm": who.key.quota.tpm or who.group.quota.tpm,
        "requests": _window(decision.requests),
        "tokens": _window(decision.tokens),
        "budget": _budget(request),
        "key_budget": _budget(request, of_key=True) if who.key.budget_nanos is not None else None,
    }
    return json_reply(payload)


async def subscription(request: web.Request) -> web.Response:
    budget = _budget(request)
    limit = budget["limit_usd"] if budget["limit_usd"] is not None else UNLIMITED_USD
    end = datetime.combine(date.fromisoformat(budget["period_end"]), time(), UTC)
    payload = {
        "object": "billing_subscription",
        "has_payment_method": True,
        "soft_limit_usd": limit,
        "hard_limit_usd": limit,
        "system_hard_limit_usd": limit,
        "access_until": int(end.timestamp()) if budget["limit_usd"] is not None else 0,
    }
    return json_reply(payload)


def _date_param(request: web.Request, name: str, default: date) -> date:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    problem = InvalidRequest(
        f"'{name}' must be a date in the form YYYY-MM-DD; got '{raw}'.", param=name
    )
    if len(raw) != 10:
        raise problem
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise problem from None


def date_range(request: web.Request) -> tuple[date, date]:
    today = datetime.now(UTC).date()
    start = _date_param(request, "start_date", today.replace(day=1))
    end = _date_param(request, "end_date", today + timedelta(days=1))
    if end <= start:
        raise InvalidRequest(
            "'end_date' must be after 'start_date' (the end date is exclusive).", param="end_date"
        )
    if (end - start).days > MAX_RANGE_DAYS:
        raise InvalidRequest(
            f"The date range may span at most {MAX_RANGE_DAYS} days.", param="end_date"
        )
    return start, end


async def usage(request: web.Request) -> web.Response:
    svc, who = services(request), caller(request)
    start, end = date_range(request)
    writer = svc.meter.writer
    if writer.backlog and not writer.failing:  # a database refusing writes is not waited on
        await writer.flush()
    rows = await svc.store.daily_usage(who.group.id, start, end)
    return json_reply(usage_report(rows, start, end))


def usage_report(rows: list[DailyUsage], start: date, end: date) -> dict[str, Any]:
    by_day: defaultdict[date, list[DailyUsage]] = defaultdict(list)
    for row in rows:
        by_day[row.day].append(row)
    daily = []
    for offset in range((end - start).days):
        day = start + timedelta(days=offset)
        items = [_line_item(row) for row in by_day.get(day, [])]
        daily.append(
            {"timestamp": int(datetime.combine(day, time(), UTC).timestamp()), "line_items": items}
        )
    total_nanos = sum(row.cost_nanos for row in rows)
    return {
        "object": "list",
        "start_date": start.isoformat(),
        "end_date": end.isoformat(),
        "daily_costs": daily,
        "total_usage": nanos_to_cents(total_nanos),
        "totals": _totals(rows, total_nanos),
    }


def _line_item(row: DailyUsage) -> dict[str, Any]:
    return {
        "name": row.model,
        "cost": nanos_to_cents(row.cost_nanos),
        "requests": row.requests,
        "prompt_tokens": row.prompt_tokens,
        "cached_tokens": row.cached_tokens,
        "cache_write_tokens": row.cache_write_tokens,
        "completion_tokens": row.completion_tokens,
        "characters": row.characters,
        "audio_seconds": row.audio_ms / 1000,
    }


def _totals(rows: list[DailyUsage], total_nanos: int) -> dict[str, Any]:
    prompt = sum(row.prompt_tokens for row in rows)
    completion = sum(row.completion_tokens for row in rows)
    return {
        "requests": sum(row.requests for row in rows),
        "prompt_tokens": prompt,
        "cached_tokens": sum(row.cached_tokens for row in rows),
        "cache_write_tokens": sum(row.cache_write_tokens for row in rows),
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "characters": sum(row.characters for row in rows),
        "audio_seconds": sum(row.audio_ms for row in rows) / 1000,
        "cost_usd": nanos_to_usd(total_nanos),
    }
