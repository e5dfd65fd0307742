"""POST /v1/completions (classic completions)."""

from __future__ import annotations

from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager
from typing import Any

from aiohttp import web

from parley.api.body import (
    read_json,
    required_string,
)
from parley.api.textgen import Endpoint, TextRequest, run_text_job, text_request
from parley.domain.models import COMPLETION_KINDS
from parley.domain.tokens import estimate_prompt
from parley.domain.wire import JSON
from parley.errors import InvalidRequest
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.providers.registry import ProviderRegistry
from parley.providers.shapes import ShapedBatches


def _choice_text(reply: dict[str, Any]) -> str:
    return "".join(
        choice["text"]
        for choice in reply.get("choices") or ()
        if isinstance(choice, dict) and isinstance(choice.get("text"), str)
    )


def _call(providers: ProviderRegistry, route: Route, body: JSON) -> Awaitable[JSON]:
    return providers.completion(route.provider_type).completion(route.target, body)


def _open(
    providers: ProviderRegistry, route: Route, body: JSON
) -> AbstractAsyncContextManager[ShapedBatches]:
    return providers.completion(route.provider_type).completion_stream(route.target, body)


COMPLETIONS = Endpoint(
    Operation("completions", "/v1/completions", COMPLETION_KINDS),
    id_prefix="cmpl-",
    produced_text=_choice_text,
    call=_call,
    open=_open,
)


async def create_completion(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    text = parse_completion(body, len(await request.read()))  # the body read once, kept
    return await run_text_job(request, COMPLETIONS, text)


def parse_completion(body: dict[str, Any], body_bytes: int) -> TextRequest:
    model = required_string(body, "model")
    prompt = body.get("prompt")
    if prompt is None:
        raise InvalidRequest("Missing required parameter: 'prompt'.", param="prompt")
    if not _valid_prompt(prompt):
        raise InvalidRequest(
            "'prompt' must be a string, an array of strings, or an array of token arrays.",
            param="prompt",
        )
    return text_request(
        body, model=model, prompt_estimate=estimate_prompt(prompt), body_bytes=body_bytes
    )


def _valid_prompt(prompt: Any) -> bool:
    if isinstance(prompt, str):
        return True
    if not isinstance(prompt, list) or not prompt:
        return False
    if all(isinstance(item, str) for item in prompt):
        return True
    if all(isinstance(item, int) and not isinstance(item, bool) for item in prompt):
        return True
    return all(isinstance(item, list) and all(isinstance(t, int) for t in item) for item in prompt)
