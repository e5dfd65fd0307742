"""The adapter for upstreams that speak Google's ``generateContent`` (``type: gemini``, and
the Gemini models of ``type: vertex``).

The canonical call (``dialects/call.py``) is written as a ``GenerateContentRequest``
(``dialects/gemini.py``); a whole reply comes back as a canonical ``Reply``, and a
stream (``:streamGenerateContent?alt=sse``) is read into chat chunks by
``GeminiToChat``, which ``generate_stream`` chains with the caller's own renderer
(OpenAI chat, Anthropic Messages, Responses). Classic completions are chat calls with the
prompt as the one user turn (as on Anthropic channels); embeddings go through
``:batchEmbedContents``.

Where the call goes and how it is signed is the ``Endpoint``'s: the Gemini API's
``{base_url}/models/{model}:{method}`` with the key in ``x-goog-api-key``
(``ApiKeyEndpoint``), or Vertex AI's project path with an OAuth token
(``providers/vertex/``). Errors map as ``refusal.py`` says.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import ClassVar, Protocol, TypeVar

import orjson

from parley import upstream_json
from parley.dialects import canonical, gemini
from parley.dialects.call import GEMINI, ChatCall, Dialect, Speaks
from parley.dialects.canonical import Unsupported
from parley.dialects.gemini_to_chat import GeminiToChat
from parley.dialects.outbound import Codec, outbound
from parley.dialects.translator import Chained, ChunkTranslator, Translator
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, UpstreamError
from parley.http import HttpClient, Prepared, Reply, prepare
from parley.providers.anthropic.completions import CompletionChunks, completed, completion_call
from parley.providers.base import (
    CHAT,
    COMPLETION,
    EMBEDDINGS,
    ReplyBounds,
    Serves,
    Target,
    upstream_errors,
)
from parley.providers.gemini.refusal import google_refusal, stream_failure
from parley.providers.openai.answers import check_stream_start, faults, malformed
from parley.providers.translated import TranslatedStream

T = TypeVar("T")
GENERATE = "generateContent"
STREAM = "streamGenerateContent?alt=sse"
EMBED = "batchEmbedContents"
SPEAKS: Speaks = (GEMINI,)


class Endpoint(Protocol):
    """Where a channel's calls go and how they are signed."""

    def head(self, target: Target, method: str) -> Awaitable[Prepared]:
        """The request head for ``method`` (``generateContent``...) of the target's model."""

    def refused(self, target: Target, status: int) -> None:
        """The upstream answered ``status`` (an error): a 401 may mean the credentials
        the endpoint holds went stale."""


class ApiKeyEndpoint:
    """The Gemini API (Google AI Studio): ``{base_url}/models/{model}:{method}``, the
    channel's key in ``x-goog-api-key`` (never in the URL, where logs would keep it)."""

    __slots__ = ()

    async def head(self, target: Target, method: str) -> Prepared:
        return _api_key_head(target.base_url, target.model, method, target.api_key)

    def refused(self, target: Target, status: int) -> None:
        pass  # a key is what the operator configured: nothing to renew


@functools.cache
def _api_key_head(base_url: str, model: str, method: str, api_key: str | None) -> Prepared:
    headers = dict(HEADERS)
    if api_key:
        headers["x-goog-api-key"] = api_key
    return prepare("POST", f"{base_url}/models/{model}:{method}", headers)


HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


class GeminiAdapter:
    """``Chat`` (the canonical call translated), ``Completion`` and ``Embeddings`` over
    the one ``HttpClient``. ``remote_images``: the upstream fetches images by URL (Vertex AI)."""

    __slots__ = ("_bounds", "_endpoint", "_http", "_remote_images")
    serves: ClassVar[Serves] = (CHAT, COMPLETION, EMBEDDINGS)
    dialects = frozenset(SPEAKS)

    def __init__(
        self,
        http: HttpClient,
        bounds: ReplyBounds | None,
        endpoint: Endpoint | None = None,
        *,
        remote_images: bool = False,
    ) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._endpoint = endpoint or ApiKeyEndpoint()
        self._remote_images = remote_images

    def speaks(self, target: Target) -> Speaks:
        return SPEAKS

    def relay(
        self, target: Target, dialect: Dialect, body: JSON, beta: str | None
    ) -> Awaitable[JSON]:
        raise RuntimeError(f"Gemini has no {dialect} callers: the call is translated.")

    def relay_stream(
        self,
        target: Target,
        dialect: Dialect,
        body: JSON,
        beta: str | None,
        translator: Translator[T],
    ) -> TranslatedStream[T]:
        raise RuntimeError(f"Gemini has no {dialect} callers: the call is translated.")

    async def generate(self, target: Target, call: ChatCall) -> canonical.Reply:
        reply = await self._reply(target, GENERATE, self._translated(call))
        return gemini.decode_reply(reply, target.model)

    def generate_stream(
        self, target: Target, call: ChatCall, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        """Gemini's events read into chat chunks, which ``translator`` renders."""
        reader = GeminiToChat(self._bounds.max_event_bytes, target.model)
        return self._stream(target, self._translated(call), Chained(reader, translator))

    async def completion(self, target: Target, body: JSON) -> JSON:
        return completed(await self.generate(target, completion_call(body)))

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        reader = CompletionChunks(GeminiToChat(self._bounds.max_event_bytes, target.model))
        payload = self._translated(completion_call(body))
        return self._stream(target, payload, Chained(reader, translator))

    async def embeddings(self, target: Target, body: JSON) -> JSON:
        """OpenAI's embeddings call through ``batchEmbedContents``: one vector per text, in
        order. Token-id input has no Gemini form (a 400); usage is Parley's estimate (the
        API reports none)."""
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise InvalidRequest(
                "This model's upstream embeds text: 'input' must be a string or an array "
                "of strings.",
                param="input",
            )
        dimensions = body.get("dimensions")
        payload = gemini.embed_request(
            target.model, texts, dimensions if isinstance(dimensions, int) else None
        )
        vectors = gemini.embed_vectors(await self._reply(target, EMBED, payload))
        if vectors is None or len(vectors) != len(texts):
            raise UpstreamError(
                f"The upstream channel `{target.channel}` sent embeddings that could not be read."
            )
        data = [
            {"object": "embedding", "index": index, "embedding": vector}
            for index, vector in enumerate(vectors)
        ]
        return {"object": "list", "data": data, "model": target.model}

    def codec(self, target: Target) -> Codec:
        """How this adapter writes a call it translates (``dialects/outbound.py``)."""
        return Codec("gemini", remote_images=self._remote_images)

    def _translated(self, call: ChatCall) -> JSON:
        """The canonical call as a ``GenerateContentRequest`` (or the one already written
        in a body process); what Gemini cannot say is a 400."""
        try:
            return outbound(call, Codec("gemini", remote_images=self._remote_images), "")[0]
        except Unsupported as error:
            raise InvalidRequest(error.message, param=error.param) from None

    def _reply(self, target: Target, method: str, payload: JSON) -> Awaitable[JSON]:
        return endpoint_reply(
            self._http,
            self._endpoint,
            target,
            method,
            payload,
            bounds=self._bounds,
            secret=target.api_key,
        )

    def _post(self, target: Target, method: str, payload: JSON) -> Awaitable[Reply]:
        return post(self._http, self._endpoint, target, method, payload)

    def _stream(
        self, target: Target, payload: JSON, translator: Translator[T]
    ) -> TranslatedStream[T]:
        limit = self._bounds.max_reply_bytes

        def send() -> Awaitable[Reply]:
            return self._post(target, STREAM, payload)

        def start(reply: Reply) -> Awaitable[None]:
            if reply.status >= 300:
                self._endpoint.refused(target, reply.status)
            return check_stream_start(
                reply, target, limit, _is_error, stream_failure, refused=google_refusal
            )

        return TranslatedStream(
            target.channel, send, start, translator, faults(target, stream_failure)
        )


async def post(
    http: HttpClient, endpoint: Endpoint, target: Target, method: str, payload: JSON
) -> Reply:
    """``payload`` sent to ``method`` of the target's model, with the endpoint's head."""
    head = await endpoint.head(target, method)
    return await http.send(
        head,
        orjson.dumps(payload),
        connect_timeout=target.connect_timeout,
        read_timeout=target.read_timeout,
    )


async def endpoint_reply(
    http: HttpClient,
    endpoint: Endpoint,
    target: Target,
    method: str,
    payload: JSON,
    *,
    bounds: ReplyBounds,
    secret: str | None,
) -> JSON:
    """A whole reply from a Google endpoint (Gemini API or Vertex AI) as a JSON object;
    a refusal is told in the caller's words (``secret``, the key it must never show, is
    redacted) and reported to the endpoint, which may renew its credentials."""
    with upstream_errors(target.channel):
        response = await post(http, endpoint, target, method, payload)
        raw = await response.read(bounds.max_reply_bytes)
        if response.status >= 300:
            endpoint.refused(target, response.status)
            raise google_refusal(target.channel, response.status, raw, secret, response.headers)
        reply = upstream_json.loads(raw)
    if not isinstance(reply, dict):
        raise malformed(target.channel)
    return reply


def _is_error(body: JSON) -> bool:
    return "error" in body
