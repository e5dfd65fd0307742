"""POST /v1/completions (classic completions)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from aiohttp import web

from parley.api.body import read_json, required_string
from parley.api.textgen import TextReply, TextRequest, TextStream, text_request
from parley.domain.models import COMPLETION_KINDS
from parley.domain.tokens import estimate_prompt
from parley.domain.wire import JSON
from parley.errors import InvalidRequest
from parley.pipeline import runner
from parley.pipeline.context import services
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.providers.base import COMPLETION, Translations


def _choice_text(reply: dict[str, Any]) -> str:
    return "".join(
        choice["text"]
        for choice in reply.get("choices") or ()
        if isinstance(choice, dict) and isinstance(choice.get("text"), str)
    )


COMPLETIONS = Operation("completions", "/v1/completions", COMPLETION_KINDS)


async def create_completion(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    text = parse_completion(body, len(await request.read()))  # the body read once, kept
    svc = services(request)
    if text.stream:
        return await runner.stream(request, CompletionStream(text, svc))
    return await runner.reply(request, CompletionReply(text, svc))


class CompletionReply(TextReply):
    """A whole classic completion."""

    __slots__ = ()
    operation = COMPLETIONS
    id_prefix = "cmpl-"

    def call(self, route: Route) -> Awaitable[JSON]:
        adapter = self._providers.serving(COMPLETION, route.provider_type)
        return adapter.completion(route.target, self._text.body)

    def produced(self, reply: JSON) -> str:
        return _choice_text(reply)


class CompletionStream(TextStream):
    """A streamed classic completion (``text_completion`` chunks, never by shape: a
    learned shape knows a chat delta's text, not ``choices[].text``)."""

    __slots__ = ()
    operation = COMPLETIONS
    id_prefix = "cmpl-"
    chunk_object = "text_completion"

    def open(self, route: Route) -> Translations[bytes]:
        adapter = self._providers.serving(COMPLETION, route.provider_type)
        return adapter.completion_stream(route.target, self._text.body, self.relay())


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
