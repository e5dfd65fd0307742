"""A speech model's built-in voices as the operator sees them: the engine's roster merged
with the model's catalogue (the same records ``GET /v1/audio/voices`` gives a caller,
without any group's clones). Served as ``GET /admin/voices/roster`` and on the
dashboard's Voices page."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from parley.api.reply import json_reply
from parley.domain.voices import voice_records
from parley.errors import InvalidRequest, NotFound
from parley.pipeline.context import SERVICES
from parley.pipeline.services import Services
from parley.providers.base import VoicesUnsupported


def listable_models(svc: Services) -> list[str]:
    """The speech models whose engines list voices."""
    return [
        model.name
        for model in svc.settings.models
        if model.kind == "speech"
        and (spec := svc.models.resolve(model.name)) is not None
        and spec.spec.speech is not None
        and spec.spec.speech.voice_listing
    ]


async def builtin_voices(svc: Services, name: str) -> list[dict[str, Any]]:
    """The model's built-in voices; 404 when it is no model with voices to list."""
    resolved = svc.models.resolve(name) if len(name) <= 200 else None
    if resolved is None:
        raise NotFound(f"No model named `{name}`.", param="model", code="model_not_found")
    profile = resolved.spec.speech
    unsupported = NotFound(
        f"The model `{name}` is not a local TTS model: it has no voices to list.",
        param="model",
        code="voices_not_supported",
    )
    if profile is None or not profile.voice_listing:
        raise unsupported
    model = resolved.spec.name
    try:
        roster, _ = await svc.rosters.fetch(model, svc.router.routes(model))
    except VoicesUnsupported:
        raise unsupported from None
    return voice_records(
        roster.builtin, [], profile.catalogue, status_on_every_voice=profile.status_on_every_voice
    )


async def get_roster(request: web.Request) -> web.Response:
    name = request.query.get("model", "")
    if not name:
        raise InvalidRequest("'model' must name a speech model.", param="model")
    voices = await builtin_voices(request.config_dict[SERVICES], name)
    return json_reply({"object": "list", "model": name, "data": voices})
