"""The dashboard's Realtime pages: the realtime sessions open now, and a page where an
administrator talks to a realtime model from the browser.

The live sessions are this process's own book (``runtime/live_sessions.py``): with
``serve --workers N``, the worker that serves the page lists the sessions it serves.
A group-admin sees its group's sessions alone.

The talk page never holds a key. Its form asks this module for a client secret
(``POST /admin/ui/realtime/talk``, with the session's CSRF token like every dashboard
form): a short-lived ``ek_`` secret bound to the key the administrator chose (a
group-admin: one of its group's), to the model, and to the session's configuration, made
by the same book as ``POST /v1/realtime/client_secrets``. The browser opens
``/v1/realtime`` with it (``static/talk.js``), so the session is admitted, limited and
billed as that key's, and each secret made here is in the audit log.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from parley.admin.context import admin_service
from parley.admin.service import AdminService
from parley.admin.ui.render import page
from parley.api.reply import json_reply
from parley.domain.groups import Group
from parley.domain.models import Resolved
from parley.errors import InvalidRequest, NotFound, ParleyError
from parley.pipeline.admit import resolve_model
from parley.pipeline.authenticate import Caller, check_usable
from parley.pipeline.context import SERVICES
from parley.pipeline.services import Services
from parley.runtime.live_sessions import LiveSession

TALK_SECRET_SECONDS = 60
"""How long a secret the talk page gets may open a session (the browser opens it at
once; the session itself lasts up to ``realtime.max_session_seconds``)."""
AUDIO_RATE = 24_000
"""The page's audio, both ways: PCM16 mono at 24 kHz."""
MAX_INSTRUCTIONS = 4000
REALTIME, TRANSCRIPTION = "realtime", "transcription"
ENDPOINT = "/v1/realtime"


async def realtime_page(request: web.Request) -> web.Response:
    """The realtime sessions open now (a group-admin's group's alone)."""
    service = admin_service(request)
    svc = request.config_dict[SERVICES]
    scope = service.scope
    sessions = svc.live_sessions.sessions(scope.id if scope is not None else None)
    return page(
        request,
        "realtime.html",
        {
            "sessions": [_session_view(s) for s in sessions],
            "models": _models(svc, scope, REALTIME),
        },
    )


async def talk_page(request: web.Request) -> web.Response:
    """The talk page: a key, a realtime model and the session's settings to choose."""
    service = admin_service(request)
    svc = request.config_dict[SERVICES]
    groups = {group.id: group.name for group in await service.groups()}
    keys = [
        {
            "id": state.record.id,
            "label": f"{groups.get(state.record.group_id, '?')} · "
            f"{state.record.prefix}… {state.record.name}".rstrip(),
        }
        for state in await service.keys()
        if state.status == "active"
    ]
    return page(
        request,
        "talk.html",
        {
            "keys": keys,
            "models": _models(svc, service.scope, REALTIME),
            "transcribers": _models(svc, service.scope, TRANSCRIPTION),
            "rate": AUDIO_RATE,
        },
    )


async def talk_secret(request: web.Request) -> web.Response:
    """A client secret for the talk page (JSON, never a key): ``{value, expires_at,
    model}``, or ``{error: {message, code}}`` with its status."""
    try:
        return await _mint(request)
    except ParleyError as refused:
        body = {"error": {"message": refused.message, "code": refused.code}}
        return json_reply(body, {"Cache-Control": "no-store"}, status=refused.status)


async def _mint(request: web.Request) -> web.Response:
    form = await request.post()
    service = admin_service(request)
    svc = request.config_dict[SERVICES]
    caller = await _caller(service, _text(form.get("key")))
    check_usable(caller)
    model = resolve_model(svc.models, caller, _text(form.get("model")), {REALTIME}, ENDPOINT)
    session = _session(model, svc, caller, _text(form.get("transcription")), form)
    value, secret = await svc.client_secrets.issue(
        caller.key.id, caller.group.id, TALK_SECRET_SECONDS, model=model.spec.name, session=session
    )
    await service.audit(
        "realtime.talk",
        f"key {caller.key.id} ({caller.key.prefix}…)",
        group=caller.group.name,
        model=model.spec.name,
    )
    expires_at = int(secret.expires_at.timestamp())
    body = {"value": value, "expires_at": expires_at, "model": model.spec.name}
    return json_reply(body, {"Cache-Control": "no-store"})


async def _caller(service: AdminService, wanted: str) -> Caller:
    """The key chosen, as a caller: one the service may see (a group-admin's own)."""
    if not wanted.isdecimal() or len(wanted) > 10:
        raise InvalidRequest("Choose a key.", param="key")
    record = (await service.find_key(int(wanted))).record
    group = _group(await service.groups(), record.group_id)
    return Caller(record, group)


def _group(groups: list[Group], group_id: int) -> Group:
    for group in groups:
        if group.id == group_id:
            return group
    raise NotFound("The key's group is gone.", param="key")


def _session(
    model: Resolved, svc: Services, caller: Caller, transcription: str, form: Any
) -> dict[str, Any]:
    """The session's configuration the secret is bound to: PCM16 at 24 kHz both ways
    (the page's), the instructions given, and the input transcribed by the model chosen."""
    pcm = {"type": "audio/pcm", "rate": AUDIO_RATE}
    audio: dict[str, Any] = {"input": {"format": pcm}, "output": {"format": pcm}}
    if transcription:
        named = resolve_model(svc.models, caller, transcription, {TRANSCRIPTION}, ENDPOINT)
        audio["input"]["transcription"] = {"model": named.spec.name}
    session: dict[str, Any] = {"type": REALTIME, "model": model.spec.name, "audio": audio}
    instructions = _text(form.get("instructions"))
    if len(instructions) > MAX_INSTRUCTIONS:
        raise InvalidRequest(
            f"Instructions may be at most {MAX_INSTRUCTIONS:,} characters.", param="instructions"
        )
    if instructions:
        session["instructions"] = instructions
    return session


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _models(svc: Services, scope: Group | None, kind: str) -> list[str]:
    """The models of ``kind``: every one for an operator, the group's for a group-admin
    (a group never sees another's)."""
    found = []
    for name in svc.model_names():
        resolved = svc.models.resolve(name)
        if resolved is None or resolved.spec.kind != kind:
            continue
        if scope is None or scope.may_use(resolved.spec.name):
            found.append(resolved.spec.name)
    return found


def _session_view(session: LiveSession) -> dict[str, Any]:
    seconds = int(session.seconds())
    return {
        "id": session.id,
        "model": session.model,
        "kind": session.kind,
        "group": session.group,
        "key_id": session.key_id,
        "key_name": session.key_name,
        "key_prefix": session.key_prefix,
        "started_at": session.started_at,
        "turns": session.turns,
        "duration": f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}",
    }
