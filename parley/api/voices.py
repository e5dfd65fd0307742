"""GET /v1/audio/voices?model=: the engine's roster, the catalogue, the group's own clones.

The list is the engine's built-in voices (an engine's uploaded voices are never listed as
such: Parley did not create them, or they are clones, listed only to their group),
merged with the model's catalogue by id, then the caller's group's clones that the engine
still holds. ``supports_custom`` says whether the model can clone.
"""

from __future__ import annotations

from aiohttp import web

from parley.api.reply import json_reply
from parley.domain.models import Resolved
from parley.domain.speech import SpeechProfile
from parley.domain.voices import voice_records
from parley.errors import InvalidRequest, ModelNotFound, NotFound
from parley.pipeline.context import caller, services
from parley.pipeline.services import Services
from parley.providers.base import VoicesUnsupported

MODEL_REQUIRED = "The query param model is required (a text-to-speech model name)."


def not_local_tts(name: str) -> NotFound:
    return NotFound(
        f"The model `{name}` is not a local TTS model: it has no voices to manage.",
        param="model",
        code="voices_not_supported",
    )


def speech_model(svc: Services, request: web.Request, name: str) -> tuple[Resolved, SpeechProfile]:
    """The speech model the caller named, if its group may use it; 404 otherwise."""
    resolved = svc.models.resolve(name)
    if resolved is None or not caller(request).may_use(resolved.spec.name):
        raise ModelNotFound(name)
    profile = resolved.spec.speech
    if profile is None or not profile.voice_listing:
        raise not_local_tts(name)
    return resolved, profile


def model_param(request: web.Request, form_value: object = None) -> str:
    name = request.query.get("model") or form_value
    if not isinstance(name, str) or not name:
        raise InvalidRequest(MODEL_REQUIRED, param="model", code="missing_required_parameter")
    return name


async def list_voices(request: web.Request) -> web.Response:
    svc = services(request)
    resolved, profile = speech_model(svc, request, model_param(request))
    model = resolved.spec.name
    try:
        roster, route = await svc.rosters.fetch(model, svc.router.routes(model))
    except VoicesUnsupported:
        raise not_local_tts(resolved.requested) from None
    held = set(roster.uploaded)
    clones = [
        clone
        for clone in svc.clones.of_group(model, caller(request).group.id)
        if clone.channel != route.target.channel or clone.engine_name in held
    ]
    records = voice_records(
        roster.builtin,
        clones,
        profile.catalogue,
        status_on_every_voice=profile.status_on_every_voice,
    )
    return json_reply({"supports_custom": profile.cloning, "voices": records})
