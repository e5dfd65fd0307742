"""GET /v1/models, GET /v1/models/{model}, GET /v1/capabilities."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from parley.api.reply import json_reply
from parley.domain.models import ModelSpec
from parley.domain.pricing import nanos_to_usd
from parley.errors import ModelNotFound
from parley.pipeline.context import caller, services
from parley.pipeline.services import Services

ENDPOINTS = {
    "chat": ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"],
    "completion": ["/v1/completions"],
    "embedding": ["/v1/embeddings"],
    "speech": ["/v1/audio/speech"],
    "transcription": ["/v1/audio/transcriptions", "/v1/audio/translations"],
    "moderation": ["/v1/moderations"],
    "rerank": ["/v1/rerank", "/v2/rerank"],
    "image": ["/v1/images/generations", "/v1/images/edits"],
}


def visible_models(svc: Services, request: web.Request) -> list[ModelSpec]:
    """Models the caller's group and key may use and some channel serves; no aliases."""
    who = caller(request)
    served = svc.router.served()
    return [m for m in svc.models.listed() if m.name in served and who.may_use(m.name)]


def model_record(spec: ModelSpec, capabilities: dict[str, str]) -> dict[str, Any]:
    price = spec.price
    record: dict[str, Any] = {
        "id": spec.name,
        "object": "model",
        "created": spec.created,
        "owned_by": spec.owned_by,
        "kind": spec.kind,
        "context_window": spec.context_window,
        "vision": spec.vision,
        "aliases": list(spec.aliases),
        "endpoints": ENDPOINTS.get(spec.kind, []),
        "capabilities": sorted(key for key, name in capabilities.items() if name == spec.name),
        "pricing": {
            "currency": "USD",
            "input_per_1k_tokens": nanos_to_usd(price.input_per_1k),
            "output_per_1k_tokens": nanos_to_usd(price.output_per_1k),
            "per_1k_characters": nanos_to_usd(price.per_1k_characters),
            "per_minute": nanos_to_usd(price.per_minute),
            "per_search_unit": nanos_to_usd(price.per_search_unit),
        },
    }
    if spec.kind == "image":
        record["pricing"]["image_input_per_1k_tokens"] = nanos_to_usd(price.image_input_per_1k)
        record["pricing"]["per_image"] = {
            f"{size}/{quality}": nanos_to_usd(nanos) for size, quality, nanos in price.per_image
        }
    if spec.speech is not None:
        record["speech"] = spec.speech.options()
    if spec.transcription is not None:
        record["transcription"] = spec.transcription.describe()
    return record


async def list_models(request: web.Request) -> web.Response:
    svc = services(request)
    capabilities = svc.models.capabilities()
    data = [model_record(spec, capabilities) for spec in visible_models(svc, request)]
    return json_reply({"object": "list", "data": data})


async def retrieve_model(request: web.Request) -> web.Response:
    svc = services(request)
    name = request.match_info["model"]
    resolved = svc.models.resolve(name)
    visible = {spec.name for spec in visible_models(svc, request)}
    if resolved is None or resolved.spec.name not in visible:
        raise ModelNotFound(name)
    record = model_record(resolved.spec, svc.models.capabilities())
    headers = {"deprecation": "true"} if resolved.deprecated else {}
    return json_reply(record, headers)


async def list_capabilities(request: web.Request) -> web.Response:
    svc = services(request)
    visible = {spec.name: spec for spec in visible_models(svc, request)}
    mapping = {key: name for key, name in svc.models.capabilities().items() if name in visible}
    data = [_capability(key, visible[name]) for key, name in sorted(mapping.items())]
    return json_reply({"object": "list", "data": data, "capabilities": mapping})


def _capability(key: str, spec: ModelSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {"object": "capability", "key": key, "model": spec.name}
    entry["kind"] = spec.kind
    if spec.transcription is not None:
        entry["transcription"] = spec.transcription.describe()
    if spec.speech is not None:
        entry["speech"] = spec.speech.options()
    return entry
