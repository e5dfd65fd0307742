"""The dashboard's channel pages: the list with the form that adds a channel, and one
channel with its test button, its settings form, disable/enable/delete and its history.

Every change goes through ``ChannelAdmin`` (validated, sealed, audited, applied at
once). A form that fails is shown again with the message in place and the values kept
(never the credential, which is not sent back to the browser).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web
from multidict import MultiDictProxy

from parley.admin.channel_admin import ChannelAdmin
from parley.admin.context import admin_service
from parley.admin.monitor import health_state
from parley.admin.ui.fields import FormState
from parley.admin.ui.render import page
from parley.errors import InvalidRequest, ParleyError
from parley.pipeline.context import SERVICES
from parley.runtime.channel_probe import ProbeResult

Form = MultiDictProxy[Any]

EDIT_FORM = "channel"
EDIT_FIELDS = ("type", "base_url", "models", "priority", "weight")
"""The settings form's fields sent back as typed when it fails (never ``api_key``)."""


def channel_url(name: str) -> str:
    return f"/admin/ui/channels/{quote(name, safe='')}"


def _text(form: Form, name: str) -> str:
    value = form.get(name, "")
    return value.strip() if isinstance(value, str) else ""


def _number(form: Form, name: str, label: str) -> int | None:
    raw = _text(form, name)
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidRequest(f"{label} must be a whole number.", param=name) from None


def parse_models(text: str) -> list[dict[str, str]]:
    """One model a line: ``public-name`` or ``public-name = upstream-name``."""
    models = []
    for line in text.splitlines():
        name, _, upstream = line.partition("=")
        if name.strip():
            entry = {"name": name.strip()}
            if upstream.strip():
                entry["upstream"] = upstream.strip()
            models.append(entry)
    return models


def body_from(form: Form, *, new: bool) -> dict[str, Any]:
    """The API's body from the form (the credential only when one was typed)."""
    body: dict[str, Any] = {
        "type": _text(form, "type") or "openai",
        "base_url": _text(form, "base_url"),
        "models": parse_models(_text(form, "models")),
    }
    for field, label in (("priority", "Priority"), ("weight", "Weight")):
        value = _number(form, field, label)
        if value is not None:
            body[field] = value
    if new:
        body["name"] = _text(form, "name")
    key = form.get("api_key", "")
    if isinstance(key, str) and key:
        body["api_key"] = key
    elif form.get("clear_api_key"):
        body["api_key"] = None
    return body


def _admin(request: web.Request) -> ChannelAdmin:
    return ChannelAdmin(admin_service(request), request.config_dict[SERVICES])


def _list_context(request: web.Request, admin: ChannelAdmin) -> dict[str, Any]:
    svc = request.config_dict[SERVICES]
    return {
        "views": admin.views(),
        "types": sorted(svc.providers.types()),
        "model_names": svc.model_names(),
        "sealing": svc.channels.box.ready,
        "state_of": health_state,
    }


async def channels_list(
    request: web.Request, *, error: str = "", values: Any = None, status: int = 200
) -> web.Response:
    admin = _admin(request)
    context = {**_list_context(request, admin), "error": error, "values": values or {}}
    return page(request, "channels.html", context, status=status)


async def create_channel(request: web.Request) -> web.Response:
    form = await request.post()
    try:
        body = body_from(form, new=True)
        await _admin(request).create(body)
    except ParleyError as problem:
        return await channels_list(
            request, error=problem.message, values=form, status=problem.status
        )
    raise web.HTTPSeeOther(channel_url(body["name"]))


def stored_form(view: dict[str, Any]) -> FormState:
    """The settings form as the channel is now."""
    models = "\n".join(
        m["name"] if m["upstream"] == m["name"] else f"{m['name']} = {m['upstream']}"
        for m in view["models"]
    )
    values = {"type": view["type"], "base_url": view["base_url"], "models": models}
    return FormState.fresh(
        EDIT_FORM, {**values, "priority": view["priority"], "weight": view["weight"]}
    )


def typed_form(sent: Form, problem: ParleyError) -> FormState:
    """The settings form as the operator sent it, the error beside the field it names.

    The credential typed is not sent back (the field stays empty); its error still shows
    beside it."""
    values = {name: sent.get(name, "") for name in EDIT_FIELDS}
    values["clear_api_key"] = "1" if sent.get("clear_api_key") else ""
    state = FormState(EDIT_FORM, {k: v if isinstance(v, str) else "" for k, v in values.items()})
    if problem.param in (*EDIT_FIELDS, "api_key"):
        state.errors[problem.param] = problem.message
    else:
        state.message = problem.message
    return state


async def channel_page(
    request: web.Request,
    *,
    result: ProbeResult | None = None,
    form: FormState | None = None,
    status: int = 200,
) -> web.Response:
    name = request.match_info["name"]
    admin = _admin(request)
    view = admin.view(name)
    svc = request.config_dict[SERVICES]
    context = {
        "c": view,
        "history": await admin.history(name),
        "result": result,
        "types": sorted(svc.providers.types()),
        "f": form or stored_form(view),
    }
    return page(request, "channel.html", context, status=status)


async def update_channel(request: web.Request) -> web.Response:
    form = await request.post()
    name = request.match_info["name"]
    try:
        await _admin(request).update(name, body_from(form, new=False))
    except ParleyError as problem:
        typed = typed_form(form, problem)
        return await channel_page(request, form=typed, status=problem.status)
    raise web.HTTPSeeOther(channel_url(name))


async def disable_channel(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await _admin(request).set_disabled(name, True)
    raise web.HTTPSeeOther(channel_url(name))


async def enable_channel(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await _admin(request).set_disabled(name, False)
    raise web.HTTPSeeOther(channel_url(name))


async def delete_channel(request: web.Request) -> web.Response:
    await _admin(request).delete(request.match_info["name"])
    raise web.HTTPSeeOther("/admin/ui/channels")


async def test_channel(request: web.Request) -> web.Response:
    form = await request.post()
    model = _text(form, "model") or None
    result = await _admin(request).test(request.match_info["name"], model)
    return await channel_page(request, result=result)
