"""The dashboard's Models page: every model (the config file's read-only, those managed
here with their prices now and a change scheduled), the form that adds one, and one
model's page with its settings form and delete.

Every change goes through ``ModelAdmin`` (validated, audited, applied at once). A form
that fails is shown again with the message beside the field it names and the values
kept. The form carries the usual price fields; a price the form does not show (an image
table, an explicit batch price) is kept as it is when the form is saved.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web
from multidict import MultiDictProxy

from parley.admin.context import admin_service
from parley.admin.model_admin import ModelAdmin
from parley.admin.ui.fields import FormState
from parley.admin.ui.render import page
from parley.admin.ui.requests import PRICE_UNITS
from parley.errors import ParleyError
from parley.pipeline.context import SERVICES
from parley.settings import ModelSettings

Form = MultiDictProxy[Any]

NEW_FORM = "new-model"
EDIT_FORM = "model"
KINDS = ModelSettings.model_fields["kind"].annotation.__args__  # type: ignore[union-attr]
PRICE_FIELDS = (
    ("input_per_1k", "Input, per 1K tokens"),
    ("output_per_1k", "Output, per 1K tokens"),
    ("cached_input_per_1k", "Cached input, per 1K tokens"),
    ("audio_input_per_1k", "Audio input, per 1K tokens (realtime)"),
    ("cached_audio_input_per_1k", "Cached audio input, per 1K tokens (realtime)"),
    ("audio_output_per_1k", "Audio output, per 1K tokens (realtime)"),
    ("per_1k_characters", "Speech, per 1K characters"),
    ("per_minute", "Audio, per minute"),
    ("per_search_unit", "Rerank, per search unit"),
    ("batch_discount", "Batch share (0.5: half)"),
)
"""The price fields the form shows, in USD; any other is the admin API's."""
TEXT_FIELDS = ("name", "kind", "channels", "aliases", "context_window", "effective_from")


def model_url(name: str) -> str:
    return f"/admin/ui/models/{quote(name, safe='')}"


def _text(form: Form, name: str) -> str:
    value = form.get(name, "")
    return value.strip() if isinstance(value, str) else ""


def parse_channels(text: str) -> list[dict[str, str]]:
    """One channel a line: ``channel`` or ``channel = upstream model name``."""
    channels = []
    for line in text.splitlines():
        channel, _, upstream = line.partition("=")
        if channel.strip():
            entry = {"channel": channel.strip()}
            if upstream.strip():
                entry["upstream"] = upstream.strip()
            channels.append(entry)
    return channels


def body_from(form: Form, prices: dict[str, Any], *, new: bool) -> dict[str, Any]:
    """The API's body from the form: ``prices`` (the model's now) with the form's price
    fields laid over them (an empty field unsets that price)."""
    body: dict[str, Any] = {
        "kind": _text(form, "kind") or "chat",
        "channels": parse_channels(_text(form, "channels")),
        "aliases": [a.strip() for a in _text(form, "aliases").split(",") if a.strip()],
        "enabled": bool(form.get("enabled")),
    }
    body["context_window"] = _text(form, "context_window") or None
    laid = dict(prices)
    for field, _ in PRICE_FIELDS:
        value = _text(form, field)
        if value:
            laid[field] = value
        else:
            laid.pop(field, None)
    if new or laid != prices:
        body["prices"] = laid
    if new:
        body["name"] = _text(form, "name")
    elif _text(form, "effective_from"):
        body["effective_from"] = _text(form, "effective_from")
    if not new and form.get("cancel_next"):
        body["next_prices"] = None
    return body


def _admin(request: web.Request) -> ModelAdmin:
    return ModelAdmin(admin_service(request), request.config_dict[SERVICES])


def _channel_names(request: web.Request) -> list[str]:
    book = request.config_dict[SERVICES].channels
    return [c.name for c in book.configured] + [c.name for c in book.stored]


def form_of(view: dict[str, Any], form_id: str = EDIT_FORM) -> FormState:
    """The settings form as the model is now."""
    channels = "\n".join(
        c["channel"] if c["upstream"] == view["name"] else f"{c['channel']} = {c['upstream']}"
        for c in view["channels"]
    )
    values = {
        "kind": view["kind"],
        "channels": channels,
        "aliases": ", ".join(view["aliases"] or ()),
        "context_window": view["context_window"] or "",
        "enabled": "1" if view["enabled"] else "",
        **{field: view["prices"].get(field, "") for field, _ in PRICE_FIELDS},
    }
    return FormState.fresh(form_id, values)


def typed_form(form_id: str, sent: Form, problem: ParleyError) -> FormState:
    """The form as the operator sent it, the error beside the field it names."""
    names = (*TEXT_FIELDS, *(field for field, _ in PRICE_FIELDS), "enabled")
    state = FormState(form_id, {n: v for n in names if isinstance(v := sent.get(n, ""), str)})
    param = (problem.param or "").removeprefix("prices.")
    if param in names:
        state.errors[param] = problem.message
    else:
        state.message = problem.message
    return state


async def models_page(
    request: web.Request, *, form: FormState | None = None, status: int = 200
) -> web.Response:
    context = {
        "views": _admin(request).views(),
        "kinds": KINDS,
        "price_fields": PRICE_FIELDS,
        "channel_names": _channel_names(request),
        "units": PRICE_UNITS,
        "f": form or FormState.fresh(NEW_FORM, {"kind": "chat", "enabled": "1"}),
    }
    return page(request, "models.html", context, status=status)


async def create_model(request: web.Request) -> web.Response:
    form = await request.post()
    body = body_from(form, {}, new=True)
    try:
        await _admin(request).create(body)
    except ParleyError as problem:
        typed = typed_form(NEW_FORM, form, problem)
        return await models_page(request, form=typed, status=problem.status)
    raise web.HTTPSeeOther(model_url(body["name"]))


async def model_page(
    request: web.Request, *, form: FormState | None = None, status: int = 200
) -> web.Response:
    view = _admin(request).view(request.match_info["name"])
    context = {
        "m": view,
        "kinds": KINDS,
        "price_fields": PRICE_FIELDS,
        "channel_names": _channel_names(request),
        "units": PRICE_UNITS,
        "f": form or form_of(view),
    }
    return page(request, "model.html", context, status=status)


async def update_model(request: web.Request) -> web.Response:
    form = await request.post()
    name = request.match_info["name"]
    admin = _admin(request)
    try:
        current = admin.view(name)
        await admin.update(name, body_from(form, current["prices"], new=False))
    except ParleyError as problem:
        typed = typed_form(EDIT_FORM, form, problem)
        return await model_page(request, form=typed, status=problem.status)
    raise web.HTTPSeeOther(model_url(name))


async def delete_model(request: web.Request) -> web.Response:
    await _admin(request).delete(request.match_info["name"])
    raise web.HTTPSeeOther("/admin/ui/models")
