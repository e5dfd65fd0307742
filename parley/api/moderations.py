"""POST /v1/moderations: OpenAI's moderation, from ``kind: moderation`` models, through the
runner.

The request is OpenAI's: ``input`` is a string, an array of strings, or an array of
parts (``{"type": "text", "text"}`` and ``{"type": "image_url", "image_url": {"url"}}``,
at most ``MAX_INPUTS`` of any), and ``model`` is optional: OpenAI's default,
``omni-moderation-latest``, is asked for when it is absent (so a deployment names its
moderation model, or an alias, so). The body goes to an OpenAI-compatible channel as
it came, but for the upstream's model name.

Moderation replies carry no usage, so the call is metered on input tokens: the
upstream's ``usage.prompt_tokens`` where it reports one, else Parley's estimate (text
at four characters a token, an image at ``TOKENS_PER_IMAGE``), marked estimated. The
reply is the upstream's ``{id, model, results}`` with the public model and the metered
``usage`` added.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from parley.api.body import read_json
from parley.api.input_job import InputJob
from parley.domain.tokens import TOKENS_PER_IMAGE, estimate_text
from parley.domain.usage import Usage, reported_usage, with_estimate
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, UpstreamError
from parley.pipeline import runner
from parley.pipeline.call import Call
from parley.pipeline.context import services
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.providers.base import MODERATION
from parley.providers.registry import ProviderRegistry

MODERATIONS = Operation("moderations", "/v1/moderations", frozenset({"moderation"}))
DEFAULT_MODEL = "omni-moderation-latest"
MAX_INPUTS = 2048


async def create_moderation(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    size = len(await request.read())  # the body read once, kept by aiohttp
    job = ModerationJob(parse_moderation(body), services(request).providers, size)
    return await runner.reply(request, job)


def parse_moderation(body: dict[str, Any]) -> dict[str, Any]:
    """Check the request's fields; the body as the upstream will get it (``model`` set)."""
    model = body.get("model")
    if model is None:
        body = {**body, "model": DEFAULT_MODEL}
    elif not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string.", param="model")
    inputs = body.get("input")
    if inputs is None:
        raise InvalidRequest("Missing required parameter: 'input'.", param="input")
    if isinstance(inputs, str):
        return body
    if not isinstance(inputs, list) or not inputs:
        raise InvalidRequest(
            "'input' must be a string, an array of strings or an array of text and "
            "image_url parts, and not empty.",
            param="input",
        )
    if len(inputs) > MAX_INPUTS:
        raise InvalidRequest(f"'input' may hold at most {MAX_INPUTS} items.", param="input")
    if not all(isinstance(item, str) for item in inputs):
        for index, part in enumerate(inputs):
            _check_part(part, f"input[{index}]")
    return body


def _check_part(part: Any, where: str) -> None:
    if not isinstance(part, dict):
        raise InvalidRequest(
            f"'{where}' must be a text or image_url part (strings and parts do not mix).",
            param=where,
        )
    kind = part.get("type")
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise InvalidRequest(f"'{where}.text' must be a string.", param=f"{where}.text")
    elif kind == "image_url":
        image = part.get("image_url")
        if not isinstance(image, dict) or not isinstance(image.get("url"), str):
            raise InvalidRequest(
                f"'{where}.image_url' must be an object with a 'url' string.",
                param=f"{where}.image_url",
            )
    else:
        raise InvalidRequest(
            f"'{where}.type' must be 'text' or 'image_url'.", param=f"{where}.type"
        )


def _texts_and_images(inputs: str | list[Any]) -> tuple[int, int]:
    """The estimated tokens of the input's text, and its count of images."""
    if isinstance(inputs, str):
        return estimate_text(inputs), 0
    tokens = images = 0
    for item in inputs:
        if isinstance(item, str):
            tokens += estimate_text(item)
        elif item["type"] == "text":
            tokens += estimate_text(item["text"])
        else:
            images += 1
    return tokens, images


class ModerationJob(InputJob):
    """One moderation call: a ``ReplyJob`` for the runner."""

    __slots__ = ()
    operation = MODERATIONS

    def __init__(self, body: dict[str, Any], providers: ProviderRegistry, body_bytes: int) -> None:
        tokens, images = _texts_and_images(body["input"])
        estimate = tokens + images * TOKENS_PER_IMAGE
        super().__init__(body, providers, estimate, body_bytes, images)

    async def call(self, route: Route) -> JSON:
        adapter = self._providers.serving(MODERATION, route.provider_type)
        reply = await adapter.moderations(route.target, self._body)
        results = reply.get("results")
        if not isinstance(results, list) or not all(isinstance(item, dict) for item in results):
            raise UpstreamError(
                f"The upstream channel `{route.target.channel}` sent a moderation reply "
                "without a list of results."
            )
        return reply

    def usage(self, reply: JSON) -> Usage:
        reported = reported_usage(reply.get("usage"), source="the upstream", completion=None)
        return with_estimate(reported, Usage(prompt_tokens=self._estimate, estimated=True))

    def render(self, reply: JSON, call: Call, usage: Usage) -> web.StreamResponse:
        reply["model"] = call.model.spec.name
        reply["usage"] = {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.total_tokens}
        return web.Response(body=orjson.dumps(reply), content_type="application/json")
