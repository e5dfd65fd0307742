"""The read-only dashboard pages: overview, usage (with CSV), channels, audit log."""

from __future__ import annotations

from aiohttp import web

from parley.admin.context import admin_service
from parley.admin.monitor import DayTotals, overview
from parley.admin.reports import DIMENSIONS, query_from_params
from parley.admin.ui.channel_pages import channels_list
from parley.admin.ui.charts import Bar, bar_chart
from parley.admin.ui.render import page, usd
from parley.api.context import SERVICES
from parley.domain.pricing import nanos_to_usd
from parley.errors import InvalidRequest

AUDIT_PAGE = 100


def axis_usd(value: float) -> str:
    """Dollars short enough for a chart's axis."""
    if value == 0 or value >= 0.01:
        return usd(value)
    return f"${value:.4f}" if value >= 0.0001 else "<$0.0001"


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
    view = await overview(request.config_dict[SERVICES].store)
    charts = {
        "requests": bar_chart(_bars(view.days, "requests"), title="Requests per day"),
        "tokens": bar_chart(_bars(view.days, "tokens"), title="Tokens per day"),
        "spend": bar_chart(_bars(view.days, "cost_nanos"), title="Spend per day", fmt=axis_usd),
    }
    return page(
        request,
        "overview.html",
        {"view": view, "today": view.today, "period": view.period, "charts": charts},
    )


async def usage_page(request: web.Request) -> web.Response:
    service = admin_service(request)
    error, report = "", None
    try:
        report = await service.usage(query_from_params(request.query))
    except InvalidRequest as problem:
        error = problem.message
    svc = request.config_dict[SERVICES]
    return page(
        request,
        "usage.html",
        {
            "report": report,
            "error": error,
            "groups": [group.name for group in await service.groups()],
            "models": [model.name for model in svc.settings.models],
            "dimensions": DIMENSIONS,
            "csv_query": request.query_string,
        },
    )


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
    raw = request.query.get("before", "")
    before = int(raw) if raw.isdigit() else None
    entries = await admin_service(request).audit_log(limit=AUDIT_PAGE, before_id=before)
    older = entries[-1].id if len(entries) == AUDIT_PAGE else None
    return page(request, "audit.html", {"entries": entries, "older": older})
