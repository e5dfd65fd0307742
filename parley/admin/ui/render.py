"""Rendering pages: the Jinja2 environment (templates shipped in the package, every
value escaped), built when the first page is rendered."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from parley.admin.context import GROUP_SCOPE, ROLE, SESSION, TEMPLATES
from parley.pipeline.context import SERVICES


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("parley.admin", "templates"),
        autoescape=select_autoescape(default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    env.filters["instant"] = instant
    env.filters["usd"] = usd
    env.filters["unit_usd"] = unit_usd
    env.filters["number"] = lambda value: f"{value:,}"
    env.filters["epoch"] = lambda seconds: when(datetime.fromtimestamp(seconds, UTC))
    env.filters["to_second"] = to_second
    env.filters["path"] = path_breaks
    env.filters["setting"] = setting
    return env


def setting(value: Any) -> str:
    """A setting as the audit log shows it: a list joined, nothing as "none"."""
    if value is None:
        return "none"
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value) or "none (empty)"
    return str(value)


def to_second(value: datetime | None) -> str:
    """A deadline (a rotated secret's grace) to the second: a grace of thirty seconds
    shown to the minute would read as already over, or not begun."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def path_breaks(value: str) -> Markup:
    """A path (``/v1/chat/completions``) that may break only after a '/', never inside a
    word (the page's text otherwise breaks anywhere, to keep narrow screens unscrolled)."""
    return Markup("<wbr>").join(escape(part) for part in _after_slashes(value))


def _after_slashes(value: str) -> list[str]:
    parts = value.split("/")
    return [part + "/" for part in parts[:-1]] + [parts[-1]]


def when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def instant(value: str | datetime | None) -> str:
    """One moment to the millisecond (a request's time), in ``when``'s form."""
    if value is None:
        return "—"
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def unit_usd(value: float | str) -> str:
    """A unit price exactly, to the nano-dollar: ``$0.00001`` (never rounded, since a
    price per token is often far below a cent)."""
    return "$" + (f"{Decimal(str(value)):.9f}".rstrip("0").rstrip(".") or "0")


def usd(value: float | None) -> str:
    """Dollars to the cent from $1 up; below a dollar to three significant digits (a
    call's cost of $0.0134 is not rounded to $0.01), at most six decimals."""
    if value is None:
        return "—"
    size = abs(value)
    if value == 0 or size >= 1:
        return f"${value:,.2f}"
    if size < 0.000001:
        return "<\u00a0$0.000001"
    places = min(6, 2 - math.floor(math.log10(size)))
    text = f"{value:.{places}f}".rstrip("0")
    whole, _, fraction = text.partition(".")
    return f"${whole}.{fraction.ljust(2, '0')}"


def has_speech(request: web.Request) -> bool:
    """Whether a speech model is configured: only then are there voices to show (the
    Voices tab is hidden otherwise; its page still answers, saying so)."""
    services = request.config_dict.get(SERVICES)
    if services is None:
        return False
    return any(model.kind == "speech" for model in services.settings.models)


def has_realtime(request: web.Request) -> bool:
    """Whether a realtime model is configured (the Realtime tab is hidden otherwise; its
    pages still answer)."""
    services = request.config_dict.get(SERVICES)
    if services is None:
        return False
    configured = (model.kind for model in services.settings.models)
    live = (model.spec.kind for model in services.model_book.live)
    return any(kind == "realtime" for kind in (*configured, *live))


def page(
    request: web.Request,
    template: str,
    context: Mapping[str, Any],
    *,
    status: int = 200,
) -> web.Response:
    env = request.config_dict[TEMPLATES].environment(environment)
    session = request.get(SESSION)
    role = request.get(ROLE, "viewer")
    html = env.get_template(template).render(
        {
            "csrf": session.csrf if session is not None else "",
            "signed_in": session is not None,
            "path": request.path,
            "who": session.who if session is not None else "",
            "role": role,
            "can_operate": role in ("operator", "owner"),
            "is_owner": role == "owner",
            "has_speech": has_speech(request),
            "has_realtime": has_realtime(request),
            "group_scope": request.get(GROUP_SCOPE),
            "can_keys": role in ("operator", "owner", "group-admin"),
            **context,
        }
    )
    return web.Response(
        text=html, content_type="text/html", status=status, headers={"Cache-Control": "no-store"}
    )
