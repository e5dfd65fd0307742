"""What the operator watches: the overview (today and the last 30 days) and the
channels with their live health. Read-only; shared by the admin API and the dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import quote

from yarl import URL

from parley.admin.service import AdminService
from parley.admin.views import Budget, key_name
from parley.domain.pricing import nanos_to_usd
from parley.runtime.alerts import Alerts
from parley.runtime.breaker import Breakers
from parley.runtime.circuit import BreakerView, State
from parley.runtime.health import ChannelHealth, HealthSnapshot
from parley.runtime.health_checks import CheckOutcome
from parley.settings import ChannelSettings
from parley.store.base import AdminStore

OVERVIEW_DAYS = 30


@dataclass(slots=True)
class DayTotals:
    day: date
    requests: int = 0
    tokens: int = 0
    cost_nanos: int = 0
    errors: int = 0
    """5xx: the gateway's or an upstream's failures."""
    client_errors: int = 0
    """4xx but 429: refusals and the callers' own mistakes."""
    rate_limited: int = 0
    """429: refused for rates or budget."""

    def add(self, other: DayTotals) -> None:
        self.requests += other.requests
        self.tokens += other.tokens
        self.cost_nanos += other.cost_nanos
        self.errors += other.errors
        self.client_errors += other.client_errors
        self.rate_limited += other.rate_limited

    def view(self) -> dict[str, Any]:
        return {
            "day": self.day.isoformat(),
            "requests": self.requests,
            "tokens": self.tokens,
            "cost_usd": nanos_to_usd(self.cost_nanos),
            "errors": self.errors,
            "client_errors": self.client_errors,
            "rate_limited": self.rate_limited,
        }


@dataclass(slots=True)
class Overview:
    days: list[DayTotals]
    """The last ``OVERVIEW_DAYS`` UTC days, oldest first, today last."""
    groups: int
    active_keys: int

    @property
    def today(self) -> DayTotals:
        return self.days[-1]

    @property
    def period(self) -> DayTotals:
        total = DayTotals(self.days[0].day)
        for day in self.days:
            total.add(day)
        return total

    def view(self) -> dict[str, Any]:
        period = self.period.view()
        period.pop("day")
        return {
            "object": "overview",
            "today": self.today.view(),
            "last_30_days": period,
            "days": [day.view() for day in self.days],
            "groups": self.groups,
            "active_keys": self.active_keys,
        }


WATCH_ROWS = 5
"""How many top spenders and groups nearest their budget the overview lists."""


@dataclass(frozen=True, slots=True)
class Spend:
    """A group's or a key's spend this budget period, against its own budget if any."""

    kind: str
    """``group`` or ``key``."""
    name: str
    """The group's name; a key's prefix and label."""
    link: str
    """Its dashboard page."""
    budget: Budget

    def view(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, **self.budget.view()}


@dataclass(frozen=True, slots=True)
class BudgetWatch:
    """The overview's spend: the top spending groups and keys this period, and the groups
    nearest their budget (over it first)."""

    groups: list[Spend]
    keys: list[Spend]
    nearest: list[Spend]

    def view(self) -> dict[str, Any]:
        return {
            "top_groups": [spend.view() for spend in self.groups],
            "top_keys": [spend.view() for spend in self.keys],
            "nearest_budget": [spend.view() for spend in self.nearest],
        }


async def budget_watch(service: AdminService, rows: int = WATCH_ROWS) -> BudgetWatch:
    """Who spends most this period and which groups are nearest their budget (the live
    ledger's spend when serving: no database read per group)."""
    groups = [
        Spend("group", group.name, f"/admin/ui/groups/{quote(group.name, safe='')}", budget)
        for group in await service.groups()
        for budget in [await service.budget(group)]
    ]
    keys = [
        Spend("key", key_name(record), f"/admin/ui/keys/{record.id}", budget)
        for record in await service.store.list_keys()
        for budget in [await service.key_budget(record)]
    ]

    def top(spends: list[Spend]) -> list[Spend]:
        spent = [spend for spend in spends if spend.budget.spent_nanos > 0]
        return sorted(spent, key=lambda spend: -spend.budget.spent_nanos)[:rows]

    budgeted = [spend for spend in groups if spend.budget.share is not None]
    nearest = sorted(budgeted, key=lambda spend: -(spend.budget.share or 0.0))[:rows]
    return BudgetWatch(top(groups), top(keys), nearest)


def alerts_view(alerts: Alerts | None) -> dict[str, Any]:
    """The open alerts (newest first) and the latest raised by this process, resolved or
    not (the audit log keeps every one)."""
    if alerts is None:
        return {"active": [], "recent": []}
    return {
        "active": [alert.view() for alert in alerts.active()],
        "recent": [alert.view() for alert in alerts.recent],
    }


async def overview(store: AdminStore, now: datetime | None = None) -> Overview:
    today = (now or datetime.now(UTC)).date()
    first = today - timedelta(days=OVERVIEW_DAYS - 1)
    days = {
        first + timedelta(days=n): DayTotals(first + timedelta(days=n))
        for n in range(OVERVIEW_DAYS)
    }
    for row in await store.usage_rollups(first, today + timedelta(days=1)):
        point = days[row.day]
        point.requests += row.requests
        point.tokens += row.prompt_tokens + row.completion_tokens
        point.cost_nanos += row.cost_nanos
    since = datetime.combine(first, time(), UTC)
    for day, counts in (await store.failures_by_day(since)).items():
        if day in days:
            days[day].errors += counts.server_errors
            days[day].client_errors += counts.client_errors
            days[day].rate_limited += counts.rate_limited
    keys = await store.list_keys()
    active = sum(1 for key in keys if key.usable_at(datetime.now(UTC)))
    return Overview(list(days.values()), len(await store.list_groups()), active)


@dataclass(frozen=True, slots=True)
class ChannelView:
    settings: ChannelSettings
    health: HealthSnapshot | None
    breakers: tuple[BreakerView, ...] = ()
    """The channel's own breaker first, then its models'; empty when turned off."""
    check: CheckOutcome | None = None
    """The latest scheduled health check, when this process ran one."""

    @property
    def address(self) -> str:
        """The base URL without user info, query or fragment (none of it may be secret)."""
        url = URL(self.settings.base_url)
        return str(url.with_user(None).with_query(None).with_fragment(None))

    def view(self) -> dict[str, Any]:
        channel = self.settings
        return {
            "name": channel.name,
            "type": channel.type,
            "base_url": self.address,
            "has_api_key": channel.api_key is not None,
            "models": [{"name": m.name, "upstream": m.upstream or m.name} for m in channel.models],
            "priority": channel.priority,
            "weight": channel.weight,
            "timeouts": channel.timeouts.model_dump(),
            "health": _health_view(self.health, self._down()),
            "circuit": _circuit_view(self.breakers),
            "check": _check_view(channel, self.check),
        }

    def _down(self) -> str | None:
        """Why the channel is down, if it is: its latest check found every model failing,
        or its own breaker is open (cooling down). ``None`` when it is not."""
        if self.check is not None and self.check.down:
            return self.check.error
        if not self.breakers:
            return None
        own, *models = self.breakers
        if own.state == State.OPEN:
            return own.last_error or "circuit breaker open"
        if models and all(model.state == State.OPEN for model in models):
            return models[0].last_error or "every model's circuit breaker open"
        return None


def _check_view(channel: ChannelSettings, check: CheckOutcome | None) -> dict[str, Any]:
    """The scheduled health check's settings and latest outcome (``None`` until one ran
    in this process)."""
    options = channel.health
    last: dict[str, Any] | None = None
    if check is not None:
        last = {
            "at": _stamp(check.at),
            "ok": check.ok,
            "down": check.down,
            "failed_in_a_row": check.failed_in_a_row,
            "error": check.error or None,
            "models": [
                {
                    "model": result.model,
                    "ok": result.ok,
                    "status": result.status,
                    "latency_ms": result.latency_ms,
                    "error": result.message or None,
                }
                for result in check.results
            ],
        }
    return {
        "enabled": options.interval_seconds is not None,
        "interval_seconds": options.interval_seconds,
        "disable_after": options.disable_after,
        "last": last,
    }


def _circuit_view(breakers: tuple[BreakerView, ...]) -> dict[str, Any] | None:
    """The channel's breaker, with its models' under ``models``."""
    if not breakers:
        return None
    own, *models = breakers
    return {**_breaker_view(own), "models": [_breaker_view(found) for found in models]}


def _breaker_view(breaker: BreakerView) -> dict[str, Any]:
    view: dict[str, Any] = {"model": breaker.model} if breaker.model else {}
    return {
        **view,
        "state": breaker.state.name.lower(),
        "calls": breaker.calls,
        "errors": breaker.errors,
        "error_rate": round(breaker.error_rate, 4),
        "failures_in_a_row": breaker.failures_in_a_row,
        "last_error": breaker.last_error or None,
        "last_failure_at": _stamp(breaker.last_failure_at),
        "next_probe_at": _stamp(breaker.next_probe_at),
    }


def _health_view(health: HealthSnapshot | None, down: str | None = None) -> dict[str, Any]:
    """The calls' health; ``state`` is ``down`` (with ``down_reason``) when a check or
    the channel's own breaker says so, whatever the calls said."""
    view = _calls_view(health)
    if down is not None:
        view["state"] = "down"
    view["down_reason"] = down
    return view


def _calls_view(health: HealthSnapshot | None) -> dict[str, Any]:
    if health is None:
        return {
            "calls": 0,
            "errors": 0,
            "error_rate": 0.0,
            "mean_latency_ms": None,
            "p95_latency_ms": None,
            "last_error_status": None,
            "last_error_at": None,
            "last_ok_at": None,
            "state": "idle",
        }
    return {
        "calls": health.calls,
        "errors": health.errors,
        "error_rate": round(health.error_rate, 4),
        "mean_latency_ms": round(health.mean_latency_ms, 1),
        "p95_latency_ms": health.p95_latency_ms,
        "last_error_status": health.last_error_status,
        "last_error_at": _stamp(health.last_error_at),
        "last_ok_at": _stamp(health.last_ok_at),
        "state": health_state(health),
    }


def health_state(health: HealthSnapshot | None) -> str:
    """``idle`` (no calls seen), ``healthy``, ``degraded`` (some failures) or ``failing``
    (the latest call failed and at least half of the window did)."""
    if health is None or health.calls == 0:
        return "idle"
    last_failed = (health.last_error_at or 0) > (health.last_ok_at or 0)
    if last_failed and health.error_rate >= 0.5:
        return "failing"
    return "degraded" if health.errors else "healthy"


def _stamp(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


def channels(
    settings: tuple[ChannelSettings, ...], health: ChannelHealth, breakers: Breakers | None = None
) -> list[ChannelView]:
    return [
        ChannelView(
            channel,
            health.snapshot(channel.name),
            tuple(breakers.views(channel.name)) if breakers is not None else (),
        )
        for channel in settings
    ]
