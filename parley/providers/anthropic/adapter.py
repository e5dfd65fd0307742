"""The adapter for upstreams that speak Anthropic's Messages API (``type: anthropic``).

It speaks Messages (``speaks``). A call of any other dialect arrives as the canonical
call (``dialects/call.py``) and is written as a Messages body
(``dialects/anthropic_messages.py``); the reply comes back as a canonical ``Reply``, and
a stream is read event by event into chat chunks (``dialects/messages_to_chat.py``). A
Messages caller's body is passed through (``relay``): sent as it came but for the model,
with its ``anthropic-beta`` header, so fields Parley does not know survive.

The channel's key goes as ``x-api-key`` with ``anthropic-version: 2023-06-01``. Errors
map to the tree as the OpenAI adapter's do; an ``overloaded_error`` (529) fails over to
the next channel like a 503.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import ClassVar, TypeVar

import orjson

from parley.dialects import anthropic_messages_reply
from parley.dialects.call import ANTHROPIC_MESSAGES, ChatCall, Dialect, Speaks
from parley.dialects.canonical import Reply, Unsupported
from parley.dialects.messages_to_chat import MessagesToChat
from parley.dialects.outbound import Codec, outbound
from parley.dialects.translator import Chained, ChunkTranslator, Translator
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, UpstreamError
from parley.http import HttpClient, Prepared, prepare
from parley.http import Reply as HttpReply
from parley.providers.anthropic.completions import CompletionChunks, completed, completion_call
from parley.providers.anthropic.refusal import stream_failure
from parley.providers.base import (
    CHAT,
    COMPLETION,
    TOKEN_COUNT,
    ReplyBounds,
    Serves,
    Target,
)
from parley.providers.openai.answers import faults, stream_start, whole_reply
from parley.providers.translated import TranslatedStream

T = TypeVar("T")
MESSAGES_PATH = "/messages"
COUNT_PATH = "/messages/count_tokens"
VERSION = "2023-06-01"
SPEAKS: Speaks = (ANTHROPIC_MESSAGES,)


def messages_body(call: ChatCall, model: str, default_max_tokens: int) -> JSON:
    """The canonical call as a Messages body, without ``stream`` (the caller sets it),
    or the one already written for it in a body process (``dialects/outbound.py``);
    what Messages cannot say is a 400."""
    try:
        return outbound(call, messages_codec(default_max_tokens), model)[0]
    except Unsupported as error:
        raise InvalidRequest(error.message, param=error.param) from None


def messages_codec(default_max_tokens: int) -> Codec:
    """How a chat body is written for an upstream that speaks Messages."""
    return Codec("anthropic", default_max_tokens)


class AnthropicAdapter:
    """``Chat`` (a Messages caller's body passed through, any other's canonical call
    translated), ``TokenCount`` and ``Completion`` over the one ``HttpClient``.
    ``default_max_tokens`` is sent when a caller gave no limit (Messages needs one)."""

    __slots__ = ("_bounds", "_default_max_tokens", "_http")
    serves: ClassVar[Serves] = (CHAT, COMPLETION, TOKEN_COUNT)
    dialects = frozenset(SPEAKS)

    def __init__(
        self, http: HttpClient, bounds: ReplyBounds | None, default_max_tokens: int
    ) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._default_max_tokens = default_max_tokens

    def speaks(self, target: Target) -> Speaks:
        return SPEAKS

    def relay(
        self, target: Target, dialect: Dialect, body: JSON, beta: str | None
    ) -> Awaitable[JSON]:
        return self._reply(target, MESSAGES_PATH, {**body, "model": target.model}, beta)

    def relay_stream(
        self,
        target: Target,
        dialect: Dialect,
        body: JSON,
        beta: str | None,
        translator: Translator[T],
    ) -> TranslatedStream[T]:
        return self._stream(target, {**body, "model": target.model}, beta, translator)

    async def generate(self, target: Target, call: ChatCall) -> Reply:
        reply = await self._reply(target, MESSAGES_PATH, self._translated(target, call), None)
        return anthropic_messages_reply.decode_reply(reply)

    def generate_stream(
        self, target: Target, call: ChatCall, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        """The Messages events read into chat chunks, which ``translator`` renders."""
        payload = {**self._translated(target, call), "stream": True}
        chained = Chained(MessagesToChat(self._bounds.max_event_bytes), translator)
        return self._stream(target, payload, None, chained)

    async def completion(self, target: Target, body: JSON) -> JSON:
        return completed(await self.generate(target, completion_call(body)))

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        """A completion stream: the Messages events read into ``text_completion``
        chunks, which ``translator`` renders."""
        payload = {**self._translated(target, completion_call(body)), "stream": True}
        reader = CompletionChunks(MessagesToChat(self._bounds.max_event_bytes))
        return self._stream(target, payload, None, Chained(reader, translator))

    def codec(self, target: Target) -> Codec:
        """How this adapter writes a call it translates (``dialects/outbound.py``)."""
        return messages_codec(self._default_max_tokens)

    async def count_tokens(self, target: Target, call: ChatCall) -> int:
        payload = {**call.body, "model": target.model}
        reply = await self._reply(target, COUNT_PATH, payload, call.beta)
        tokens = reply.get("input_tokens")
        if not isinstance(tokens, int):
            raise UpstreamError(f"The upstream channel `{target.channel}` sent no token count.")
        return tokens

    def _translated(self, target: Target, call: ChatCall) -> JSON:
        return messages_body(call, target.model, self._default_max_tokens)

    def _reply(self, target: Target, path: str, payload: JSON, beta: str | None) -> Awaitable[JSON]:
        sending = _post(self._http, target, path, payload, beta)
        return whole_reply(sending, target, self._bounds.max_reply_bytes)

    def _stream(
        self, target: Target, payload: JSON, beta: str | None, translator: Translator[T]
    ) -> TranslatedStream[T]:
        limit = self._bounds.max_reply_bytes

        def send() -> Awaitable[HttpReply]:
            return _post(self._http, target, MESSAGES_PATH, payload, beta, stream=True)

        start = stream_start(target, limit, _is_error, stream_failure)
        fault = faults(target, stream_failure)
        return TranslatedStream(target.channel, send, start, translator, fault)


def _post(
    http: HttpClient,
    target: Target,
    path: str,
    payload: JSON,
    beta: str | None,
    *,
    stream: bool = False,
) -> Awaitable[HttpReply]:
    """Send the request. A stream's reads may each take the channel's idle timeout (its
    silence between events); a whole reply's, its read timeout."""
    head = _request(target.base_url, path, target.api_key, beta)
    return http.send(
        head,
        orjson.dumps(payload),
        connect_timeout=target.connect_timeout,
        read_timeout=target.stream_timeout if stream else target.read_timeout,
    )


def _request(base_url: str, path: str, api_key: str | None, beta: str | None) -> Prepared:
    """The request head: rendered once per channel, endpoint and key, unless it carries
    a caller's ``anthropic-beta`` (then for that call alone)."""
    if beta is None:
        return _plain_request(base_url, path, api_key)
    return prepare("POST", f"{base_url}{path}", {**_headers(api_key), "anthropic-beta": beta})


@functools.cache
def _plain_request(base_url: str, path: str, api_key: str | None) -> Prepared:
    return prepare("POST", f"{base_url}{path}", _headers(api_key))


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "anthropic-version": VERSION,
    }
    if api_key:
        headers["x-api-key"] = api_key
    return headers


def _is_error(reply: JSON) -> bool:
    return reply.get("type") == "error"
