"""The adapter for Vertex AI channels (``type: vertex``): Google's models and Anthropic's.

A channel's ``base_url`` is the regional API root (``https://{region}-aiplatform.
googleapis.com/v1``); its calls go to ``{base_url}/projects/{project}/locations/{region}/
publishers/{publisher}/models/{model}:{method}`` with an OAuth access token
(``tokens.py``) as ``Authorization: Bearer``. The publisher follows from the upstream
model's name: ``claude-*`` models are Anthropic's, others Google's, and an explicit
``anthropic/`` or ``google/`` prefix says it outright.

Google's models speak ``generateContent`` (the Gemini adapter with a ``VertexEndpoint``;
Vertex fetches images by URL), and its embedding models ``predict`` (``embeddings.py``).
Anthropic's speak Messages through ``rawPredict`` and ``streamRawPredict``: the Anthropic
codec's body without ``model`` (it is in the URL) and with ``anthropic_version:
vertex-2023-10-16``, read back as on an Anthropic channel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import TypeVar

from parley.dialects import anthropic_messages, openai_chat
from parley.dialects.messages_to_chat import MessagesToChat
from parley.dialects.translator import Chained, ChunkTranslator, Translator
from parley.domain.wire import JSON
from parley.errors import UpstreamError
from parley.http import HttpClient, Prepared, Reply, prepare
from parley.providers.anthropic.adapter import messages_body
from parley.providers.anthropic.completions import CompletionChunks, as_chat, as_completion
from parley.providers.anthropic.refusal import stream_failure as messages_failure
from parley.providers.base import ReplyBounds, Target
from parley.providers.gemini.adapter import HEADERS, GeminiAdapter, endpoint_reply, post
from parley.providers.gemini.refusal import google_refusal
from parley.providers.openai.answers import faults
from parley.providers.translated import TranslatedStream
from parley.providers.vertex import embeddings
from parley.providers.vertex.channels import VertexChannels

T = TypeVar("T")
ANTHROPIC_VERSION = "vertex-2023-10-16"
CONCURRENT_PREDICTS = 8
"""The most embedding ``predict`` calls one request has under way at once."""


def publisher(model: str) -> tuple[str, str]:
    """``(publisher, model)`` for an upstream model name."""
    owner, _, name = model.rpartition("/")
    if owner:
        return owner, name
    return ("anthropic" if name.startswith("claude") else "google"), name


class VertexEndpoint:
    """``Endpoint``: the project's model URL, signed with the channel's current token."""

    __slots__ = ("_channels",)

    def __init__(self, channels: VertexChannels) -> None:
        self._channels = channels

    async def head(self, target: Target, method: str) -> Prepared:
        channel = self._channels.of(target)
        owner, model = publisher(target.model)
        url = (
            f"{target.base_url}/projects/{channel.project}/locations/{channel.region}"
            f"/publishers/{owner}/models/{model}:{method}"
        )
        token = await channel.tokens.token()
        return prepare("POST", url, {**HEADERS, "Authorization": f"Bearer {token}"})

    def refused(self, target: Target, status: int) -> None:
        """A 401 says the token was refused (revoked, or the clock is off): the next call
        mints a new one."""
        if status == 401:
            self._channels.of(target).tokens.forget()


class VertexAdapter:
    """``Chat``, ``ChatTranslation`` and ``Completion``, by the model's publisher, and
    ``Embeddings`` (Google's embedding models)."""

    __slots__ = ("_bounds", "_claude", "_endpoint", "_gemini", "_http")

    def __init__(
        self,
        http: HttpClient,
        bounds: ReplyBounds | None,
        channels: VertexChannels,
        default_max_tokens: int,
    ) -> None:
        endpoint = self._endpoint = VertexEndpoint(channels)
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._gemini = GeminiAdapter(http, bounds, endpoint, remote_images=True)
        self._claude = VertexClaude(http, bounds, endpoint, default_max_tokens)

    def _adapter(self, target: Target) -> GeminiAdapter | VertexClaude:
        return self._claude if publisher(target.model)[0] == "anthropic" else self._gemini

    async def chat(self, target: Target, body: JSON) -> JSON:
        return await self._adapter(target).chat(target, body)

    def chat_translated(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        return self._adapter(target).chat_translated(target, body, translator)

    async def completion(self, target: Target, body: JSON) -> JSON:
        return as_completion(await self.chat(target, as_chat(body)))

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        return self._adapter(target).completion_stream(target, body, translator)

    async def embeddings(self, target: Target, body: JSON) -> JSON:
        """OpenAI's embeddings call through ``predict``, in as many calls as the model
        takes texts (``CONCURRENT_PREDICTS`` at a time); usage is the tokens Vertex
        counted."""
        texts = embeddings.texts_of(body)
        payloads = [
            embeddings.predict_request(batch, body)
            for batch in embeddings.batches(target.model, texts)
        ]
        vectors: list[list[float]] = []
        tokens: int | None = 0
        for start in range(0, len(payloads), CONCURRENT_PREDICTS):
            group = payloads[start : start + CONCURRENT_PREDICTS]
            for found in await _together([self._predict(target, one) for one in group]):
                read = embeddings.read_predictions(found)
                if read is None:
                    raise _unreadable(target)
                vectors.extend(read[0])
                tokens = None if tokens is None or read[1] is None else tokens + read[1]
        if len(vectors) != len(texts):
            raise _unreadable(target)
        data = [
            {"object": "embedding", "index": index, "embedding": vector}
            for index, vector in enumerate(vectors)
        ]
        reply: JSON = {"object": "list", "data": data, "model": target.model}
        if tokens is not None:
            reply["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
        return reply

    def _predict(self, target: Target, payload: JSON) -> Coroutine[None, None, JSON]:
        return endpoint_reply(
            self._http,
            self._endpoint,
            target,
            "predict",
            payload,
            bounds=self._bounds,
            secret=None,
        )


async def _together(calls: list[Coroutine[None, None, JSON]]) -> list[JSON]:
    """The calls' replies, in order; the first failure cancels the others and is raised."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _unreadable(target: Target) -> UpstreamError:
    return UpstreamError(
        f"The upstream channel `{target.channel}` sent embeddings that could not be read."
    )


class VertexClaude:
    """Anthropic's models on Vertex AI: Messages bodies through ``rawPredict``."""

    __slots__ = ("_bounds", "_default_max_tokens", "_endpoint", "_http")

    def __init__(
        self,
        http: HttpClient,
        bounds: ReplyBounds | None,
        endpoint: VertexEndpoint,
        default_max_tokens: int,
    ) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._endpoint = endpoint
        self._default_max_tokens = default_max_tokens

    async def chat(self, target: Target, body: JSON) -> JSON:
        reply = await self._reply(target, self._translated(target, body))
        return openai_chat.encode_reply(anthropic_messages.decode_reply(reply))

    def chat_translated(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        reader = MessagesToChat(self._bounds.max_event_bytes)
        return self._stream(target, body, Chained(reader, translator))

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        reader = CompletionChunks(MessagesToChat(self._bounds.max_event_bytes))
        return self._stream(target, as_chat(body), Chained(reader, translator))

    def _translated(self, target: Target, body: JSON) -> JSON:
        """An OpenAI chat body as a Vertex Messages body: the model is in the URL, and the
        API version in the body."""
        payload = messages_body(body, target.model, self._default_max_tokens)
        payload.pop("model", None)
        payload["anthropic_version"] = ANTHROPIC_VERSION
        return payload

    def _post(self, target: Target, method: str, payload: JSON) -> Awaitable[Reply]:
        return post(self._http, self._endpoint, target, method, payload)

    def _reply(self, target: Target, payload: JSON) -> Awaitable[JSON]:
        return endpoint_reply(
            self._http,
            self._endpoint,
            target,
            "rawPredict",
            payload,
            bounds=self._bounds,
            secret=None,
        )

    def _stream(self, target: Target, body: JSON, translator: Translator[T]) -> TranslatedStream[T]:
        payload = {**self._translated(target, body), "stream": True}
        limit = self._bounds.max_reply_bytes

        def send() -> Awaitable[Reply]:
            return self._post(target, "streamRawPredict", payload)

        async def start(reply: Reply) -> None:
            if reply.status >= 300:
                self._endpoint.refused(target, reply.status)
                raw = await reply.read(limit)
                raise google_refusal(target.channel, reply.status, raw, None, reply.headers)
            if reply.content_type != "text/event-stream":
                raise UpstreamError(
                    f"The upstream channel `{target.channel}` did not stream its reply."
                )

        fault = faults(target, messages_failure)
        return TranslatedStream(target.channel, send, start, translator, fault)
