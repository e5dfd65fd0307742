"""The read-only dashboard pages: overview, usage (with CSV), channels, audit log."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

from aiohttp import web
from markupsafe import Markup

from parley.admin.context import admin_service
from parley.admin.fields import MAX_LIMIT
from parley.admin.finding import audit_query_from_params
from parley.admin.monitor import DayTotals, alerts_view, budget_watch, overview
from parley.admin.reports import DIMENSIONS, UsageQuery, query_from_params
from parley.admin.service import AdminService
from parley.admin.ui.channel_pages import channels_list
from parley.admin.ui.charts import Bar, bar_chart, ranking_chart
from parley.admin.ui.render import page, usd
from parley.domain.audit import ACTIONS, AuditQuery
from parley.domain.pricing import nanos_to_usd
from parley.errors import InvalidRequest
from parley.pipeline.context import SERVICES

AUDIT_PAGE = 100
AUDIT_ACTIONS = tuple(
    choice
    for family in dict.fromkeys(action.split(".")[0] for action, _ in ACTIONS)
    for choice in (
        (f"{family}.", f"every {family}.* action"),
        *((action, action) for action, _ in ACTIONS if action.startswith(f"{family}.")),
    )
)
"""The actions the audit page offers to filter by (any other can be typed in the URL)."""


def axis_usd(value: float) -> str:
    """Dollars short enough for a chart's axis."""
    if value == 0 or value >= 0.0001:
        return usd(value)
    return "<$0.0001"


def _bars(days: list[DayTotals], field: str) -> list[Bar]:
    bars = []
    for day in days:
        value = float(getattr(day, field))
        if field == "cost_nanos":
            value = nanos_to_usd(int(value))
        highlight = float(day.errors) if field == "requests" else 0.0
        bars.append(Bar(day.day.strftime("%b %d"), value, highlight))
    return bars


async def overview_page(request: web.Request) -> web.Response:
    svc = request.config_dict[SERVICES]
    view = await overview(svc.store)
    charts = {
        "requests": bar_chart(_bars(view.days, "requests"), title="Requests per day"),
        "tokens": bar_chart(_bars(view.days, "tokens"), title="Tokens per day"),
        "spend": bar_chart(_bars(view.days, "cost_nanos"), title="Spend per day", fmt=axis_usd),
    }
    return page(
        request,
        "overview.html",
        {
            "view": view,
            "today": view.today,
            "period": view.period,
            "charts": charts,
            "alerts": alerts_view(svc.alerts),
            "watch": await budget_watch(admin_service(request)),
            "budget_period": svc.meter.ledger.period,
        },
    )


async def usage_page(request: web.Request) -> web.Response:
    """The usage report as a table, and spend in the same range and filters charted by
    model, group and key."""
    service = admin_service(request)
    error, report, charts = "", None, {}
    try:
        query = query_from_params(request.query)
        report = await service.usage(query)
        charts = await _usage_charts(service, query)
    except InvalidRequest as problem:
        error = problem.message
    svc = request.config_dict[SERVICES]
    return page(
        request,
        "usage.html",
        {
            "report": report,
            "charts": charts,
            "error": error,
            "groups": [group.name for group in await service.groups()],
            "models": svc.model_names(),
            "dimensions": DIMENSIONS,
            "csv_query": request.query_string,
            "key_filter": report.query.key if report else None,
        },
    )


async def _usage_charts(service: AdminService, query: UsageQuery) -> dict[str, Markup]:
    charts = {}
    for dimension, title in (("model", "model"), ("group", "group"), ("key", "key")):
        split = await service.usage(replace(query, by=(dimension,)))
        bars = [
            Bar(keys[dimension], nanos_to_usd(totals.cost_nanos)) for keys, totals in split.rows
        ]
        charts[dimension] = ranking_chart(bars, title=f"Spend by {title}", fmt=usd)
    return charts


async def usage_csv(request: web.Request) -> web.Response:
    report = await admin_service(request).usage(query_from_params(request.query))
    name = f"parley-usage-{report.query.since}-{report.query.until}.csv"
    return web.Response(
        text=report.csv(),
        content_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


async def channels_page(request: web.Request) -> web.Response:
    """Every channel, and the form that adds one (``channel_pages.py``)."""
    return await channels_list(request)


async def audit_page(request: web.Request) -> web.Response:
    """The audit log, newest first, filtered by actor, action, target and days."""
    raw = request.query.get("before", "")
    before = int(raw) if raw.isdecimal() and len(raw) <= 10 else None
    if before is not None and before > MAX_LIMIT:  # past every id PostgreSQL's column holds
        before = None
    error, entries, query = "", [], AuditQuery()
    try:
        query = audit_query_from_params(request.query)
        entries = await admin_service(request).audit_log(
            limit=AUDIT_PAGE, before_id=before, query=query
        )
    except InvalidRequest as problem:
        error = problem.message
    older = entries[-1].id if len(entries) == AUDIT_PAGE else None
    filters = {
        name: request.query.get(name, "")
        for name in ("actor", "action", "target", "since", "until")
    }
    kept = {name: value for name, value in filters.items() if value}
    return page(
        request,
        "audit.html",
        {
            "entries": entries,
            "older": older,
            "filters": filters,
            "older_url": "/admin/ui/audit?" + urlencode({**kept, "before": older or ""}),
            "error": error,
            "actions": AUDIT_ACTIONS,
            "filtered": bool(kept),
        },
    )
