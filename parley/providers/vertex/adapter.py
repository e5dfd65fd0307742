"""The adapter for Vertex AI channels (``type: vertex``): Google's models and Anthropic's.

A channel's ``base_url`` is the regional API root (``https://{region}-aiplatform.
googleapis.com/v1``); its calls go to ``{base_url}/projects/{project}/locations/{region}/
publishers/{publisher}/models/{model}:{method}`` with an OAuth access token
(``tokens.py``) as ``Authorization: Bearer``. The publisher follows from the upstream
model's name: ``claude-*`` models are Anthropic's, others Google's, and an explicit
``anthropic/`` or ``google/`` prefix says it outright.

Google's models speak ``generateContent`` (the Gemini adapter with a ``VertexEndpoint``;
Vertex fetches images by URL). Anthropic's speak Messages through ``rawPredict`` and
``streamRawPredict``: the Anthropic codec's body without ``model`` (it is in the URL) and
with ``anthropic_version: vertex-2023-10-16``, read back as on an Anthropic channel.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from parley.dialects import anthropic_messages_reply, openai_chat_reply
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
from parley.providers.vertex.channels import VertexChannels

T = TypeVar("T")
ANTHROPIC_VERSION = "vertex-2023-10-16"


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
    """``Chat``, ``ChatTranslation`` and ``Completion``, by the model's publisher."""

    __slots__ = ("_claude", "_gemini")

    def __init__(
        self,
        http: HttpClient,
        bounds: ReplyBounds | None,
        channels: VertexChannels,
        default_max_tokens: int,
    ) -> None:
        endpoint = VertexEndpoint(channels)
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
        return openai_chat_reply.encode_reply(anthropic_messages_reply.decode_reply(reply))

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
