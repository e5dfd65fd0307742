"""POST /v1/embeddings: vectors from ``kind: embedding`` models, through the runner.

The request is OpenAI's: ``input`` is a string, an array of strings, an array of token
ids, or an array of such arrays (at most ``MAX_INPUTS`` items, none empty);
``encoding_format`` (``float``, the default, or ``base64``), ``dimensions`` and ``user``
are passed through to the upstream. The caller gets the encoding it asked for even from
an upstream that ignores the field (``parley.domain.vectors``): openai-node and the
openai Python SDK ask for base64 unless told otherwise, and read numbers sent instead
as an empty vector or not at all. The call is metered by its input tokens: the upstream's
``usage.prompt_tokens``, or Parley's estimate (marked estimated) when it gave none. The
reply names the public model and carries the usage that was metered.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from parley.api.apart import Split, joined, split
from parley.api.body import decode_json, optional_positive_int, read_raw, required_string
from parley.api.input_job import InputJob
from parley.api.refusal import Refusal
from parley.domain.tokens import estimate_prompt
from parley.domain.usage import Usage, reported_usage, with_estimate
from parley.domain.vectors import Encoding, NotAVector, encoded
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError, UpstreamError
from parley.pipeline import runner
from parley.pipeline.call import Call
from parley.pipeline.context import CALLER, services
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.providers import base as capability
from parley.providers.registry import ProviderRegistry
from parley.runtime.body_pool import BodyPool

EMBEDDING_KINDS = frozenset({"embedding"})
EMBEDDINGS = Operation("embeddings", "/v1/embeddings", EMBEDDING_KINDS)
MAX_INPUTS = 2048
ENCODINGS = ("float", "base64")


async def create_embeddings(request: web.Request) -> web.StreamResponse:
    raw = await read_raw(request)
    svc = services(request)
    job = await embedding_job(
        raw,
        svc.providers,
        request[CALLER].group.id,
        svc.bodies,
        svc.settings.server.large_body_bytes,
    )
    return await runner.reply(request, job)


async def embedding_job(
    raw: bytes, providers: ProviderRegistry, group_id: int, bodies: BodyPool, large: int
) -> EmbeddingJob:
    """The job of an embeddings body: a body over ``large`` bytes read in a body process
    (``read_embeddings_apart``), in the group's turn, as a chat body is
    (``api/apart.py``): a body of token-id arrays is millions of small objects, seconds
    of decoding and checking that no other tenant waits for."""
    if len(raw) <= large:
        body = parse_embeddings(decode_json(raw))
        return EmbeddingJob(body, providers, len(raw), estimate_prompt(body["input"]))
    read = await bodies.run(group_id, read_embeddings_apart, raw)
    if isinstance(read, Refusal):
        raise read.error()
    parts, estimate = read
    return EmbeddingJob(joined(parts), providers, len(raw), estimate)


def read_embeddings_apart(raw: bytes) -> tuple[Split, int] | Refusal:
    """An embeddings body read (in a body process) as a small one is here: checked, its
    input tokens estimated, and its ``input`` handed back as its bytes when it is large
    (texts, at most ``MAX_INPUTS`` of them, come back as they are: an upstream that
    embeds texts reads them)."""
    try:
        body = parse_embeddings(decode_json(raw))
    except ParleyError as error:
        return Refusal.of(error)
    return split(body, texts_up_to=MAX_INPUTS), estimate_prompt(body["input"])


def parse_embeddings(body: dict[str, Any]) -> dict[str, Any]:
    """Check the request's fields; the body as the upstream will get it."""
    required_string(body, "model")
    _check_input(body.get("input"))
    encoding = body.get("encoding_format")
    if encoding is not None and encoding not in ENCODINGS:
        raise InvalidRequest(
            "'encoding_format' must be 'float' or 'base64'.", param="encoding_format"
        )
    optional_positive_int(body, "dimensions")
    user = body.get("user")
    if user is not None and not isinstance(user, str):
        raise InvalidRequest("'user' must be a string.", param="user")
    return body


def _check_input(value: Any) -> None:
    if value is None:
        raise InvalidRequest("Missing required parameter: 'input'.", param="input")
    if isinstance(value, str):
        if not value:
            raise InvalidRequest("'input' must not be empty.", param="input")
        return
    if not isinstance(value, list) or not value:
        raise InvalidRequest(
            "'input' must be a string, an array of strings, an array of token ids, or an "
            "array of token id arrays, and not empty.",
            param="input",
        )
    if len(value) > MAX_INPUTS:
        raise InvalidRequest(f"'input' may hold at most {MAX_INPUTS} items.", param="input")
    if not any(all(fits(item) for item in value) for fits in (_text, _token, _tokens)):
        raise InvalidRequest(
            "'input' must be all non-empty strings, all token ids, or all non-empty "
            "arrays of token ids.",
            param="input",
        )


def _text(item: Any) -> bool:
    return isinstance(item, str) and bool(item)


def _token(item: Any) -> bool:
    return isinstance(item, int) and not isinstance(item, bool) and item >= 0


def _tokens(item: Any) -> bool:
    return isinstance(item, list) and bool(item) and all(_token(token) for token in item)


class EmbeddingJob(InputJob):
    """One embeddings call: a ``ReplyJob`` for the runner."""

    __slots__ = ()
    operation = EMBEDDINGS

    def __init__(
        self, body: dict[str, Any], providers: ProviderRegistry, body_bytes: int, estimate: int
    ) -> None:
        super().__init__(body, providers, estimate, body_bytes)

    async def call(self, route: Route) -> JSON:
        adapter = self._providers.serving(capability.EMBEDDINGS, route.provider_type)
        reply = await adapter.embeddings(route.target, self._body)
        encoding: Encoding = "base64" if self._body.get("encoding_format") == "base64" else "float"
        data = reply.get("data")
        for item in data if isinstance(data, list) else ():
            if isinstance(item, dict) and "embedding" in item:
                try:
                    item["embedding"] = encoded(item["embedding"], encoding)
                except NotAVector as error:
                    raise UpstreamError(
                        f"The upstream channel `{route.target.channel}` sent a reply whose "
                        f"embedding could not be read: {error}."
                    ) from None
        return reply

    def usage(self, reply: JSON) -> Usage:
        reported = reported_usage(reply.get("usage"), source="the upstream", completion=None)
        return with_estimate(reported, Usage(prompt_tokens=self._estimate, estimated=True))

    def render(self, reply: JSON, call: Call, usage: Usage) -> web.StreamResponse:
        reply["model"] = call.model.spec.name
        reply["usage"] = {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.total_tokens}
        return web.Response(body=orjson.dumps(reply), content_type="application/json")
