"""Alerts: what the operator should hear of without watching the dashboard, delivered to
webhooks from the background, never from a caller's path.

An alert belongs to an episode, named by its ``kind`` and ``subject`` (``budget.group``
and ``group team at 80%``, ``breaker.open`` and ``primary:gpt-4o``...): raising one that is
already open does nothing, so a budget crossed by a thousand calls, or a breaker that
reopens after each probe, is one alert until it is resolved (the spend falls below the
threshold in a new period, the breaker closes). With Redis, the instance that claims the
episode (``SharedBreakers.alert_claim``, for ``CLAIM_SECONDS``) is the one that audits
and posts it: every worker sees a budget crossed. Each episode is audited once (actor
``alerts``, action ``alert.<kind>``) and posted once to every webhook, signed
(``X-Parley-Signature: sha256=<hex HMAC-SHA256 of the body with the webhook's
secret>``), and retried with doubling waits when the receiver fails or cannot be
reached.

``raise_alert`` and ``resolve`` are synchronous and allocate nothing for an open episode:
the breakers' listener calls them on a call's path. Everything else (the audit, the
posts) runs in ``run``'s task. ``AlertWatch`` looks at budgets, the usage writer, the
refusals and the health checks every ``alerts.check_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import aiohttp
import orjson
from yarl import URL

from parley.domain.audit import AuditEntry
from parley.domain.pricing import nanos_to_usd
from parley.runtime.budget import SpendLedger
from parley.runtime.circuit import State, Transition
from parley.runtime.directory import Directory
from parley.runtime.health_checks import HealthChecks
from parley.runtime.writer import UsageWriter
from parley.settings import AlertSettings, AlertWebhook
from parley.store.base import AdminStore, StoreFault, StoreUnavailable

log = logging.getLogger("parley.alerts")

ACTOR = "alerts"
SIGNATURE = "X-Parley-Signature"
RECENT = 50
"""Alerts kept in memory for the overview (the audit log keeps them all)."""

CLAIM_SECONDS = 300.0
"""How long an episode claimed by one instance is skipped by the others: long enough to
cover the seconds between workers seeing the same budget crossed, short enough that a
new episode of the same alert minutes later is posted again."""

Severity = Literal["warning", "critical"]
Claim = Callable[[str, float], Awaitable[bool]]


@dataclass(slots=True)
class Alert:
    kind: str
    subject: str
    severity: Severity
    message: str
    raised_at: float
    detail: dict[str, Any] = field(default_factory=dict)
    resolved_at: float | None = None

    def view(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "severity": self.severity,
            "message": self.message,
            "raised_at": _stamp(self.raised_at),
            "resolved_at": _stamp(self.resolved_at) if self.resolved_at else None,
            "detail": self.detail,
        }


def body_of(alert: Alert, format_: str) -> bytes:
    """The webhook's body: Slack's incoming-webhook ``text``, or the alert as JSON."""
    if format_ == "slack":
        mark = ":red_circle:" if alert.severity == "critical" else ":warning:"
        return orjson.dumps({"text": f"{mark} Parley: {alert.message}"})
    return orjson.dumps({"object": "alert", **alert.view()})


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Alerts:
    """Open episodes, the recent alerts, and the task that audits and delivers them."""

    def __init__(
        self,
        settings: AlertSettings,
        store: AdminStore,
        *,
        sleep: Callable[[float], Any] = asyncio.sleep,
        claim: Claim | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._sleep = sleep
        self.claim = claim
        self.handled = 0
        """Alerts taken from the queue: audited and posted here, or claimed elsewhere."""
        self.settled = asyncio.Condition()
        self._open: dict[tuple[str, str], Alert] = {}
        self.recent: deque[Alert] = deque(maxlen=RECENT)
        self._outbox: asyncio.Queue[Alert] = asyncio.Queue()
        self._deliveries: set[asyncio.Task[None]] = set()
        self.delivered = 0
        self.given_up = 0

    def raise_alert(
        self, kind: str, subject: str, message: str, severity: Severity = "warning", **detail: Any
    ) -> bool:
        """Open an episode (True), or nothing when it is already open (False)."""
        key = (kind, subject)
        if key in self._open:
            return False
        alert = Alert(kind, subject, severity, message, time.time(), detail)
        self._open[key] = alert
        self.recent.appendleft(alert)
        self._outbox.put_nowait(alert)
        log.warning("alert %s %s: %s", kind, subject, message)
        return True

    def resolve(self, kind: str, subject: str) -> None:
        """End the episode, if open: the next crossing is a new alert."""
        alert = self._open.pop((kind, subject), None)
        if alert is not None:
            alert.resolved_at = time.time()
            log.info("alert %s %s resolved", kind, subject)

    def is_open(self, kind: str, subject: str) -> bool:
        return (kind, subject) in self._open

    def active(self) -> list[Alert]:
        return sorted(self._open.values(), key=lambda alert: alert.raised_at, reverse=True)

    def breaker_moved(self, change: Transition) -> None:
        """A breakers listener: this process's breaker opened (an alert) or closed."""
        if change.remote:
            return
        if change.state == State.OPEN:
            self.raise_alert(
                "breaker.open",
                change.key,
                f"Circuit breaker {change.key} opened: {change.error}",
                channel=change.channel,
                model=change.model or None,
            )
        elif change.state == State.CLOSED:
            self.resolve("breaker.open", change.key)

    async def run(self) -> None:
        try:
            while True:
                alert = await self._outbox.get()
                episode = f"{alert.kind}:{alert.subject}"
                if self.claim is None or await self.claim(episode, CLAIM_SECONDS):
                    await self._audit(alert)
                    for webhook in self._settings.webhooks:
                        task = asyncio.create_task(self._deliver(webhook, alert))
                        self._deliveries.add(task)
                        task.add_done_callback(self._deliveries.discard)
                self.handled += 1
                async with self.settled:
                    self.settled.notify_all()
        finally:
            for task in list(self._deliveries):
                task.cancel()
            for task in list(self._deliveries):
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _audit(self, alert: Alert) -> None:
        entry = AuditEntry(
            created_at=datetime.fromtimestamp(alert.raised_at, UTC),
            actor=ACTOR,
            address="",
            action=f"alert.{alert.kind}",
            target=alert.subject,
            detail={"message": alert.message, "severity": alert.severity, **alert.detail},
        )
        try:
            await self._store.record_audit(entry)
        except (StoreUnavailable, StoreFault) as error:
            log.warning("alert %s %s: not audited (%s)", alert.kind, alert.subject, error)

    async def _deliver(self, webhook: AlertWebhook, alert: Alert) -> None:
        """Post the alert until the receiver answers 2xx, ``attempts`` times at most."""
        settings = self._settings
        body = body_of(alert, webhook.format)
        headers = {"Content-Type": "application/json", "User-Agent": "parley-alerts"}
        if webhook.secret:
            headers[SIGNATURE] = signature(webhook.secret, body)
        timeout = aiohttp.ClientTimeout(total=settings.timeout_seconds)
        wait = settings.backoff_seconds
        problem = ""
        async with aiohttp.ClientSession(
            timeout=timeout, cookie_jar=aiohttp.DummyCookieJar()
        ) as session:
            for attempt in range(1, settings.attempts + 1):
                try:
                    async with session.post(
                        webhook.url, data=body, headers=headers, allow_redirects=False
                    ) as reply:
                        if 200 <= reply.status < 300:
                            self.delivered += 1
                            return
                        problem = f"status {reply.status}"
                except (aiohttp.ClientError, TimeoutError) as error:
                    problem = type(error).__name__
                if attempt < settings.attempts:
                    await self._sleep(wait)
                    wait = min(wait * 2, settings.max_backoff_seconds)
        self.given_up += 1
        log.error(
            "alert %s %s: webhook %s did not take it after %d attempts (%s)",
            alert.kind,
            alert.subject,
            _host(webhook.url),
            settings.attempts,
            problem,
        )


class AlertWatch:
    """What raises and resolves alerts besides the breakers, looked at on a schedule."""

    def __init__(
        self,
        alerts: Alerts,
        settings: AlertSettings,
        *,
        directory: Directory,
        ledger: SpendLedger,
        writer: UsageWriter,
        queue_size: int,
        refusals: Callable[[], int],
        checks: HealthChecks | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._alerts = alerts
        self._settings = settings
        self._directory = directory
        self._ledger = ledger
        self._writer = writer
        self._queue_size = queue_size
        self._refusals = refusals
        self._checks = checks
        self._clock = clock
        self._last_refusals = (clock(), refusals())

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._settings.check_seconds)
            self.look()

    def look(self) -> None:
        self._budgets()
        self._writer_behind()
        self._refusal_rate()
        self._channels()

    def _budgets(self) -> None:
        for group in self._directory.groups():
            if group.budget_nanos:
                spent = self._ledger.spent(group.id)
                self._crossed("budget.group", f"group {group.name}", spent, group.budget_nanos)
        for key in self._directory.cached_keys():
            if key.budget_nanos:
                spent = self._ledger.key_spent(key.id)
                label = f"key {key.id} ({key.prefix})"
                self._crossed("budget.key", label, spent, key.budget_nanos)

    def _crossed(self, kind: str, who: str, spent: int, budget: int) -> None:
        for share in self._settings.budget_thresholds:
            subject = f"{who} at {share:.0%}"
            if spent >= share * budget:
                self._alerts.raise_alert(
                    kind,
                    subject,
                    f"{who.capitalize()} has spent {share:.0%} of its budget "
                    f"({_usd(spent)} of {_usd(budget)} USD)",
                    "critical" if share >= 1 else "warning",
                    spent_usd=nanos_to_usd(spent),
                    budget_usd=nanos_to_usd(budget),
                    threshold=share,
                )
            else:
                self._alerts.resolve(kind, subject)  # a new period, or a larger budget

    def _writer_behind(self) -> None:
        backlog = self._writer.backlog
        limit = self._settings.writer_backlog * self._queue_size
        if backlog >= limit or self._writer.failing:
            why = "cannot write to the database" if self._writer.failing else "is behind"
            self._alerts.raise_alert(
                "usage.writer_behind",
                "usage writer",
                f"The usage writer {why}: {backlog} records wait",
                "critical",
                backlog=backlog,
            )
        elif backlog < limit / 2:
            self._alerts.resolve("usage.writer_behind", "usage writer")

    def _refusal_rate(self) -> None:
        limit = self._settings.refusals_per_minute
        now, count = self._clock(), self._refusals()
        then, before = self._last_refusals
        self._last_refusals = (now, count)
        if limit is None or now <= then:
            return
        per_minute = (count - before) * 60 / (now - then)
        if per_minute >= limit:
            self._alerts.raise_alert(
                "refusals.spike",
                "refusals",
                f"{per_minute:.0f} requests refused per minute (alert at {limit:.0f})",
                per_minute=round(per_minute, 1),
            )
        elif per_minute < limit / 2:
            self._alerts.resolve("refusals.spike", "refusals")

    def _channels(self) -> None:
        if self._checks is None:
            return
        for name, outcome in list(self._checks.last.items()):
            if outcome.down:
                self._alerts.raise_alert(
                    "channel.down",
                    name,
                    f"Channel {name} is down: {outcome.error}",
                    "critical",
                    failed_checks=outcome.failed_in_a_row,
                )
            elif outcome.ok:
                self._alerts.resolve("channel.down", name)


def _usd(nanos: int) -> str:
    """Dollars to the cent, or to the nano-dollar below a cent."""
    usd = nanos_to_usd(nanos)
    return f"{usd:.2f}" if usd >= 0.01 else f"{usd:.9f}".rstrip("0").rstrip(".")


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _host(url: str) -> str:
    """A webhook named by its host only: its path may hold a token (Slack's does)."""
    return URL(url).host or "?"
