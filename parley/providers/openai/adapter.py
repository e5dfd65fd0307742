"""The adapter for upstreams that speak OpenAI's wire format (OpenAI, vLLM, Ollama, llama.cpp,
Azure OpenAI).

It speaks OpenAI chat, and the Responses API on a channel that serves it natively. A
caller of the same dialect is passed through (``relay``): the adapter only names the
upstream's model, asks streams for their usage, calls, and maps failures to the error
tree; whole replies are returned as the upstream sent them (the job rewrites ``model``
for its caller). A call of another dialect is written as a chat body from its canonical
call (``generate``), its reply read back as a canonical ``Reply``. A stream's bytes go
to the caller's translator as they arrive (``providers/translated.py``): chat chunks are
the canonical stream, so ``OpenAIRelay``, ``ChatToMessages`` and ``ChatToResponses``
read them as they are. Where a request goes and how it authenticates is its
``Endpoint``: ``BEARER`` (the base URL and the path, the key as ``Authorization:
Bearer``) unless another is given (``providers/azure/``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import ClassVar, Protocol, TypeVar

import orjson

from parley.dialects import anthropic_messages, canonical, openai_chat_reply, outbound
from parley.dialects.call import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    ChatCall,
    Dialect,
    Speaks,
)
from parley.dialects.canonical import Unsupported
from parley.dialects.translator import ChunkTranslator, Translator
from parley.domain.wire import JSON
from parley.errors import InvalidRequest
from parley.http import HttpClient, Prepared, Reply, prepare
from parley.providers.base import (
    CHAT,
    COMPLETION,
    EMBEDDINGS,
    ReplyBounds,
    Serves,
    Target,
)
from parley.providers.openai.answers import faults, stream_start, whole_reply
from parley.providers.openai.refusal import stream_failure
from parley.providers.translated import TranslatedStream

T = TypeVar("T")

CHAT_PATH = "/chat/completions"
COMPLETION_PATH = "/completions"
EMBEDDINGS_PATH = "/embeddings"
MODERATIONS_PATH = "/moderations"
RESPONSES_PATH = "/responses"
TIERED_TYPE = "openai"
"""The channel type with service tiers (OpenAI's own API)."""
CHAT_ONLY: Speaks = (OPENAI_CHAT,)
CHAT_AND_RESPONSES: Speaks = (OPENAI_CHAT, OPENAI_RESPONSES)


JSON_TYPE = "application/json"


class Endpoint(Protocol):
    """Where an OpenAI-shaped request for ``target`` goes, and with what credentials."""

    def head(self, target: Target, path: str, content_type: str = JSON_TYPE) -> Prepared:
        """The request head for the operation at ``path`` (``/chat/completions``...),
        its body of ``content_type`` (a JSON head is rendered once and kept; a
        multipart one, whose boundary changes with each body, each time)."""


class BearerEndpoint:
    """``{base_url}{path}``, the channel's key as ``Authorization: Bearer``."""

    __slots__ = ()

    def head(self, target: Target, path: str, content_type: str = JSON_TYPE) -> Prepared:
        if content_type == JSON_TYPE:
            return _request(target.base_url, path, target.api_key)
        return _head(target.base_url, path, target.api_key, content_type)


BEARER = BearerEndpoint()


class OpenAIAdapter:
    """``Chat`` (OpenAI chat, and the Responses API where a channel serves it),
    ``Completion``, ``Embeddings`` and ``Moderation`` over the process's one
    ``HttpClient``, accepting replies within ``bounds``, calling ``endpoint``.
    ``responses``: whether its upstreams may serve the Responses API (``responses:
    native``; not Azure's)."""

    __slots__ = ("_bounds", "_endpoint", "_http", "dialects")
    serves: ClassVar[Serves] = (CHAT, COMPLETION, EMBEDDINGS)

    def __init__(
        self,
        http: HttpClient,
        bounds: ReplyBounds | None = None,
        endpoint: Endpoint = BEARER,
        *,
        responses: bool = True,
    ) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._endpoint = endpoint
        self.dialects = frozenset(CHAT_AND_RESPONSES if responses else CHAT_ONLY)

    def speaks(self, target: Target) -> Speaks:
        if target.native_responses and OPENAI_RESPONSES in self.dialects:
            return CHAT_AND_RESPONSES
        return CHAT_ONLY

    def relay(
        self, target: Target, dialect: Dialect, body: JSON, beta: str | None
    ) -> Awaitable[JSON]:
        """The caller's chat (or Responses) body as it came, but for the model."""
        path = RESPONSES_PATH if dialect == OPENAI_RESPONSES else CHAT_PATH
        return self._reply(target, path, body)  # no coroutine of its own on the way

    def relay_stream(
        self,
        target: Target,
        dialect: Dialect,
        body: JSON,
        beta: str | None,
        translator: Translator[T],
    ) -> TranslatedStream[T]:
        """A chat stream's bytes fed to ``translator`` (``OpenAIRelay``), or a Responses
        stream's (``ResponsesRelay``)."""
        if dialect == OPENAI_RESPONSES:
            payload = {**body, "model": target.model, "stream": True}
            return self._translated(target, RESPONSES_PATH, payload, translator)
        return self._translated(target, CHAT_PATH, stream_body(body, target.model), translator)

    async def generate(self, target: Target, call: ChatCall) -> canonical.Reply:
        """The canonical call as a chat body, the ``chat.completion`` read back."""
        found = await self._reply(target, CHAT_PATH, chat_body(target, call))
        return openai_chat_reply.decode_reply(found)

    def generate_stream(
        self, target: Target, call: ChatCall, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        """The canonical call as a chat body; the chat stream's bytes go to the caller's
        renderer as they are (chat chunks are the canonical stream)."""
        payload = stream_body(chat_body(target, call), target.model)
        return self._translated(target, CHAT_PATH, payload, translator)

    def completion(self, target: Target, body: JSON) -> Awaitable[JSON]:
        return self._reply(target, COMPLETION_PATH, body)

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        payload = stream_body(body, target.model)
        return self._translated(target, COMPLETION_PATH, payload, translator)

    def embeddings(self, target: Target, body: JSON) -> Awaitable[JSON]:
        return self._reply(target, EMBEDDINGS_PATH, body)

    def moderations(self, target: Target, body: JSON) -> Awaitable[JSON]:
        return self._reply(target, MODERATIONS_PATH, body)

    def _translated(
        self, target: Target, path: str, payload: JSON, translator: Translator[T]
    ) -> TranslatedStream[T]:
        """A stream on ``path`` whose bytes go to ``translator`` as they arrive."""

        def send() -> Awaitable[Reply]:
            return self._post(target, path, payload, stream=True)

        start = stream_start(target, self._bounds.max_reply_bytes, _is_error, stream_failure)
        return TranslatedStream(
            target.channel, send, start, translator, faults(target, stream_failure)
        )

    def _reply(self, target: Target, path: str, body: JSON) -> Awaitable[JSON]:
        """``whole_reply``'s coroutine, for the caller to await (no coroutine of its own)."""
        sending = self._post(target, path, plain_body(body, target.model))
        return whole_reply(sending, target, self._bounds.max_reply_bytes)

    def _post(
        self, target: Target, path: str, payload: JSON, *, stream: bool = False
    ) -> Awaitable[Reply]:
        """The client's coroutine that sends the request: returned for the caller to
        await, with no coroutine of this method's on the way. A stream's reads may each
        take the channel's idle timeout; a whole reply's, its read timeout."""
        return self._http.send(
            self._endpoint.head(target, path),
            orjson.dumps(payload),
            connect_timeout=target.connect_timeout,
            read_timeout=target.stream_timeout if stream else target.read_timeout,
        )


def chat_body(target: Target, call: ChatCall) -> JSON:
    """A call of another dialect as a chat body: the one its endpoint already wrote, else
    its canonical request written here (what chat cannot say is a 400). The service
    tier is sent to OpenAI's own API alone, the only one that has tiers. A Messages body
    of plain texts is written straight (``anthropic_messages.plain_chat_body``)."""
    if call.chat_body is not None:
        return call.chat_body
    if call.dialect == ANTHROPIC_MESSAGES:
        plain = anthropic_messages.plain_chat_body(call.body, target.model)
        if plain is not None:
            return plain
    try:
        return outbound.chat_body(call.request, target.model, target.type_name == TIERED_TYPE)
    except Unsupported as error:
        raise InvalidRequest(error.message, param=error.param) from None


def plain_body(body: JSON, model: str) -> JSON:
    """The body for a whole reply: the caller's, naming the upstream's model."""
    payload = {**body, "model": model}
    if payload.get("stream"):
        payload["stream"] = False
        payload.pop("stream_options", None)
    return payload


def stream_body(body: JSON, model: str) -> JSON:
    """The body for a stream: streaming, and asking for usage on top of the caller's options."""
    options = body.get("stream_options")
    merged = (
        {**options, "include_usage": True} if isinstance(options, dict) else {"include_usage": True}
    )
    return {**body, "model": model, "stream": True, "stream_options": merged}


@functools.cache
def _request(base_url: str, path: str, api_key: str | None) -> Prepared:
    """The request head, rendered once per channel, endpoint and key."""
    return _head(base_url, path, api_key, JSON_TYPE)


def _head(base_url: str, path: str, api_key: str | None, content_type: str) -> Prepared:
    headers = {"Content-Type": content_type, "Accept": "application/json, text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return prepare("POST", f"{base_url}{path}", headers)


def _is_error(reply: JSON) -> bool:
    return "error" in reply
