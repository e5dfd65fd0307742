"""POST /v1/completions (classic completions)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import Any

from aiohttp import web

from parley.api.apart import Split, joined, split
from parley.api.body import decode_json, read_raw, required_string
from parley.api.refusal import Refusal
from parley.api.textgen import TextReply, TextRequest, TextStream, text_request
from parley.domain.models import COMPLETION_KINDS
from parley.domain.tokens import estimate_prompt
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError
from parley.pipeline import runner
from parley.pipeline.context import CALLER, services
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.providers.base import COMPLETION, Translations
from parley.runtime.body_pool import BodyPool

MAX_PROMPT_TEXTS = 2048
"""A ``prompt`` array of at most this many strings comes back from a body process as
objects (``apart.split``); a longer one, or token ids, as its bytes."""


def _choice_text(reply: dict[str, Any]) -> str:
    return "".join(
        choice["text"]
        for choice in reply.get("choices") or ()
        if isinstance(choice, dict) and isinstance(choice.get("text"), str)
    )


COMPLETIONS = Operation("completions", "/v1/completions", COMPLETION_KINDS)


async def create_completion(request: web.Request) -> web.StreamResponse:
    raw = await read_raw(request)
    svc = services(request)
    large = svc.settings.server.large_body_bytes
    text = await read_completion(raw, request[CALLER].group.id, svc.bodies, large)
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


async def read_completion(raw: bytes, group_id: int, bodies: BodyPool, large: int) -> TextRequest:
    """A completion body read: one over ``large`` bytes in a body process, in the
    group's turn (``read_completion_apart``), as a chat body is (``api/apart.py``)."""
    if len(raw) <= large:
        return parse_completion(decode_json(raw), len(raw))
    read = await bodies.run(group_id, read_completion_apart, raw)
    if isinstance(read, Refusal):
        raise read.error()
    text, parts = read
    return dataclasses.replace(text, body=joined(parts))


def read_completion_apart(raw: bytes) -> tuple[TextRequest, Split] | Refusal:
    """A completion body read (in a body process) as a small one is here: the request
    (its ``body`` empty) and the body, a long ``prompt`` array as its bytes."""
    try:
        text = parse_completion(decode_json(raw), len(raw))
    except ParleyError as error:
        return Refusal.of(error)
    parts = split(text.body, texts_up_to=MAX_PROMPT_TEXTS)
    return dataclasses.replace(text, body={}), parts


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
