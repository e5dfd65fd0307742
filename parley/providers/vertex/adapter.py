"""The adapter for Vertex AI channels (``type: vertex``): Google's models and Anthropic's.

A channel's ``base_url`` is the regional API root (``https://{region}-aiplatform.
googleapis.com/v1``); its calls go to ``{base_url}/projects/{project}/locations/{region}/
publishers/{publisher}/models/{model}:{method}`` with an OAuth access token
(``tokens.py``) as ``Authorization: Bearer``. The publisher follows from the upstream
model's name: ``claude-*`` models are Anthropic's, others Google's, and an explicit
``anthropic/`` or ``google/`` prefix says it outright.

Google's models speak ``generateContent`` (the Gemini adapter with a ``VertexEndpoint``;
Vertex fetches images by URL), and its embedding models ``predict`` (``embeddings.py``).
Anthropic's speak Messages through ``rawPredict`` and ``streamRawPredict`` (``speaks``
says which, by the model): the canonical call of any other dialect is the Anthropic
codec's, and a Messages caller's body is passed through as to an ``anthropic`` channel
(its ``anthropic-beta`` header with it), each with Vertex's two differences: no
``model`` (it is in the URL) and ``anthropic_version: vertex-2023-10-16`` in the body.
``count_tokens`` is Vertex's ``count-tokens:rawPredict``, which names the model in the
body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import ClassVar, TypeVar

import orjson

from parley import upstream_json
from parley.dialects import anthropic_messages_reply
from parley.dialects.call import ANTHROPIC_MESSAGES, GEMINI, ChatCall, Dialect, Speaks
from parley.dialects.canonical import Reply
from parley.dialects.messages_to_chat import MessagesToChat
from parley.dialects.outbound import Codec
from parley.dialects.translator import Chained, ChunkTranslator, Translator
from parley.domain.wire import JSON
from parley.errors import UpstreamError
from parley.http import HttpClient, Prepared, prepare
from parley.http import Reply as HttpReply
from parley.providers.anthropic.adapter import messages_body, messages_codec
from parley.providers.anthropic.completions import CompletionChunks, completed, completion_call
from parley.providers.anthropic.refusal import stream_failure as messages_failure
from parley.providers.base import (
    CHAT,
    COMPLETION,
    EMBEDDINGS,
    TOKEN_COUNT,
    ReplyBounds,
    Serves,
    Target,
    upstream_errors,
)
from parley.providers.gemini.adapter import HEADERS, GeminiAdapter, endpoint_reply
from parley.providers.gemini.refusal import google_refusal
from parley.providers.openai.answers import faults, malformed
from parley.providers.translated import TranslatedStream
from parley.providers.vertex import embeddings
from parley.providers.vertex.channels import VertexChannels

T = TypeVar("T")
ANTHROPIC_VERSION = "vertex-2023-10-16"
COUNT_TOKENS = "count-tokens"
"""The Anthropic publisher's token-counting model, called by ``rawPredict``."""
CONCURRENT_PREDICTS = 8
CLAUDE_SPEAKS: Speaks = (ANTHROPIC_MESSAGES,)
GEMINI_SPEAKS: Speaks = (GEMINI,)
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

    async def head(
        self, target: Target, method: str, *, model: str | None = None, beta: str | None = None
    ) -> Prepared:
        """The head for ``method`` of the target's model (or of ``model``, another of its
        publisher's, as ``count-tokens``), with a caller's ``anthropic-beta``."""
        channel = self._channels.of(target)
        owner, name = publisher(target.model)
        url = (
            f"{target.base_url}/projects/{channel.project}/locations/{channel.region}"
            f"/publishers/{owner}/models/{model or name}:{method}"
        )
        token = await channel.tokens.token()
        headers = {**HEADERS, "Authorization": f"Bearer {token}"}
        if beta is not None:
            headers["anthropic-beta"] = beta
        return prepare("POST", url, headers)

    def refused(self, target: Target, status: int) -> None:
        """A 401 says the token was refused (revoked, or the clock is off): the next call
        mints a new one."""
        if status == 401:
            self._channels.of(target).tokens.forget()


class VertexAdapter:
    """``Chat`` and ``Completion``, by the model's publisher, ``Embeddings`` (Google's
    embedding models) and ``TokenCount`` (Anthropic's)."""

    __slots__ = ("_bounds", "_claude", "_endpoint", "_gemini", "_http")
    serves: ClassVar[Serves] = (CHAT, COMPLETION, EMBEDDINGS, TOKEN_COUNT)
    dialects = frozenset(CLAUDE_SPEAKS + GEMINI_SPEAKS)

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

    def speaks(self, target: Target) -> Speaks:
        """Messages for Anthropic's models, Gemini's ``generateContent`` for Google's."""
        return CLAUDE_SPEAKS if publisher(target.model)[0] == "anthropic" else GEMINI_SPEAKS

    def codec(self, target: Target) -> Codec:
        """How a call is written for the target's model (``dialects/outbound.py``)."""
        return self._adapter(target).codec(target)

    def relay(
        self, target: Target, dialect: Dialect, body: JSON, beta: str | None
    ) -> Awaitable[JSON]:
        return self._claude.relay(target, body, beta)

    def relay_stream(
        self,
        target: Target,
        dialect: Dialect,
        body: JSON,
        beta: str | None,
        translator: Translator[T],
    ) -> TranslatedStream[T]:
        return self._claude.relay_stream(target, body, beta, translator)

    def generate(self, target: Target, call: ChatCall) -> Awaitable[Reply]:
        return self._adapter(target).generate(target, call)

    def generate_stream(
        self, target: Target, call: ChatCall, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        return self._adapter(target).generate_stream(target, call, translator)

    async def completion(self, target: Target, body: JSON) -> JSON:
        return completed(await self.generate(target, completion_call(body)))

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        return self._adapter(target).completion_stream(target, body, translator)

    def count_tokens(self, target: Target, call: ChatCall) -> Awaitable[int]:
        return self._claude.count_tokens(target, call)

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

    def codec(self, target: Target) -> Codec:
        return messages_codec(self._default_max_tokens)

    async def generate(self, target: Target, call: ChatCall) -> Reply:
        reply = await self._reply(target, "rawPredict", self._translated(target, call))
        return anthropic_messages_reply.decode_reply(reply)

    def generate_stream(
        self, target: Target, call: ChatCall, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        reader = MessagesToChat(self._bounds.max_event_bytes)
        payload = self._translated(target, call)
        return self._stream(target, payload, None, Chained(reader, translator))

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        reader = CompletionChunks(MessagesToChat(self._bounds.max_event_bytes))
        payload = self._translated(target, completion_call(body))
        return self._stream(target, payload, None, Chained(reader, translator))

    def relay(self, target: Target, body: JSON, beta: str | None) -> Awaitable[JSON]:
        """A Messages caller's whole ``message``, its body passed through."""
        return self._reply(target, "rawPredict", _relayed(body), beta)

    def relay_stream(
        self, target: Target, body: JSON, beta: str | None, translator: Translator[T]
    ) -> TranslatedStream[T]:
        """A Messages caller's stream, its body passed through and the events' bytes fed
        to ``translator`` (``MessagesRelay``)."""
        return self._stream(target, _relayed(body), beta, translator)

    async def count_tokens(self, target: Target, call: ChatCall) -> int:
        payload = {**_relayed(call.body), "model": publisher(target.model)[1]}
        reply = await self._reply(target, "rawPredict", payload, call.beta, model=COUNT_TOKENS)
        tokens = reply.get("input_tokens")
        if not isinstance(tokens, int):
            raise UpstreamError(f"The upstream channel `{target.channel}` sent no token count.")
        return tokens

    def _translated(self, target: Target, call: ChatCall) -> JSON:
        """The canonical call as a Vertex Messages body: the model is in the URL, and the
        API version in the body."""
        payload = messages_body(call, target.model, self._default_max_tokens)
        payload.pop("model", None)
        payload["anthropic_version"] = ANTHROPIC_VERSION
        return payload

    async def _reply(
        self,
        target: Target,
        method: str,
        payload: JSON,
        beta: str | None = None,
        *,
        model: str | None = None,
    ) -> JSON:
        with upstream_errors(target.channel):
            head = await self._endpoint.head(target, method, model=model, beta=beta)
            response = await self._http.send(
                head,
                orjson.dumps(payload),
                connect_timeout=target.connect_timeout,
                read_timeout=target.read_timeout,
            )
            raw = await response.read(self._bounds.max_reply_bytes)
            if response.status >= 300:
                self._endpoint.refused(target, response.status)
                raise google_refusal(target.channel, response.status, raw, None, response.headers)
            reply = upstream_json.loads(raw)
        if not isinstance(reply, dict):
            raise malformed(target.channel)
        return reply

    def _stream(
        self, target: Target, payload: JSON, beta: str | None, translator: Translator[T]
    ) -> TranslatedStream[T]:
        payload = {**payload, "stream": True}
        limit = self._bounds.max_reply_bytes

        async def send() -> HttpReply:
            head = await self._endpoint.head(target, "streamRawPredict", beta=beta)
            return await self._http.send(
                head,
                orjson.dumps(payload),
                connect_timeout=target.connect_timeout,
                read_timeout=target.stream_timeout,
            )

        async def start(reply: HttpReply) -> None:
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


def _relayed(body: JSON) -> JSON:
    """A Messages caller's body as Vertex takes it: as it came, but for ``model`` (in the
    URL) and with Vertex's ``anthropic_version`` (in the body, not a header)."""
    relayed = {name: value for name, value in body.items() if name != "model"}
    relayed["anthropic_version"] = ANTHROPIC_VERSION
    return relayed
