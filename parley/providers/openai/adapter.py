"""The adapter for upstreams that speak OpenAI's wire format (OpenAI, vLLM, Ollama, llama.cpp).

The canonical request already is this format, so the adapter only names the upstream's
model, asks streams for their usage, calls, and maps failures to the error tree. Whole
replies are returned as the upstream sent them (the job rewrites ``model`` for its
caller); a stream's bytes go to the caller's translator as they arrive
(``providers/translated.py``): ``OpenAIRelay`` for an OpenAI caller, the caller
dialect's own for any other.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import TypeVar

import orjson

from parley import upstream_json
from parley.dialects.translator import ChunkTranslator, Failure
from parley.errors import UpstreamError
from parley.http import HttpClient, Prepared, Reply, prepare
from parley.providers.base import (
    JSON,
    ReplyBounds,
    Target,
    upstream_errors,
    upstream_failure,
)
from parley.providers.openai.refusal import refusal, stream_failure
from parley.providers.translated import TranslatedStream
from parley.sse import EventTooLarge

T = TypeVar("T")

CHAT_PATH = "/chat/completions"
COMPLETION_PATH = "/completions"
EMBEDDINGS_PATH = "/embeddings"


class OpenAIAdapter:
    """``Chat``, ``ChatTranslation``, ``Completion`` and ``Embeddings`` over the process's
    one ``HttpClient``, accepting replies within ``bounds``."""

    __slots__ = ("_bounds", "_http")

    def __init__(self, http: HttpClient, bounds: ReplyBounds | None = None) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()

    async def chat(self, target: Target, body: JSON) -> JSON:
        return await self._reply(target, CHAT_PATH, body)

    def chat_translated(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        """A chat stream's bytes fed to ``translator`` (``OpenAIRelay`` for an OpenAI
        caller, the caller dialect's translator for any other)."""
        return self._translated(target, CHAT_PATH, body, translator)

    async def completion(self, target: Target, body: JSON) -> JSON:
        return await self._reply(target, COMPLETION_PATH, body)

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        return self._translated(target, COMPLETION_PATH, body, translator)

    async def embeddings(self, target: Target, body: JSON) -> JSON:
        return await self._reply(target, EMBEDDINGS_PATH, body)

    def _translated(
        self, target: Target, path: str, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        """A stream on ``path`` whose bytes go to ``translator`` as they arrive."""
        limit = self._bounds.max_reply_bytes

        def send() -> Awaitable[Reply]:
            payload = stream_body(body, target.model)
            return _post(self._http, target, path, payload, stream=True)

        def start(reply: Reply) -> Awaitable[None]:
            return _check_stream_start(reply, target, limit)

        def fault(failure: Failure) -> UpstreamError:
            return _fault(target, failure)

        return TranslatedStream(target.channel, send, start, translator, fault)

    async def _reply(self, target: Target, path: str, body: JSON) -> JSON:
        with upstream_errors(target.channel):
            response = await _post(self._http, target, path, plain_body(body, target.model))
            raw = await response.read(self._bounds.max_reply_bytes)
            if response.status >= 300:
                raise refusal(
                    target.channel, response.status, raw, target.api_key, response.headers
                )
            reply = upstream_json.loads(raw)
        if not isinstance(reply, dict):
            raise _malformed(target.channel)
        return reply


def _post(
    http: HttpClient, target: Target, path: str, payload: JSON, *, stream: bool = False
) -> Awaitable[Reply]:
    """The client's coroutine that sends the request: returned for the caller to await,
    with no coroutine of this function's on the way. A stream's reads may each take the
    channel's idle timeout; a whole reply's, its read timeout."""
    return http.send(
        _request(target.base_url, path, target.api_key),
        orjson.dumps(payload),
        connect_timeout=target.connect_timeout,
        read_timeout=target.stream_timeout if stream else target.read_timeout,
    )


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
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return prepare("POST", f"{base_url}{path}", headers)


async def _check_stream_start(response: Reply, target: Target, limit: int) -> None:
    """Raise if the upstream refused, or answered without streaming."""
    channel = target.channel
    if response.status >= 300:
        raw = await response.read(limit)
        raise refusal(channel, response.status, raw, target.api_key, response.headers)
    if response.content_type == "text/event-stream":
        return
    reply = upstream_json.loads(await response.read(limit))
    if isinstance(reply, dict) and "error" in reply:
        raise stream_failure(channel, reply, target.api_key)
    raise UpstreamError(f"The upstream channel `{channel}` did not stream its reply.")


def _fault(target: Target, failure: Failure) -> UpstreamError:
    """The error for what a translator saw go wrong in a chat stream."""
    if failure.payload is not None:
        return stream_failure(target.channel, failure.payload, target.api_key)
    if failure.too_large:
        error = upstream_failure(target.channel, EventTooLarge(0, []))
        assert error is not None
        return error
    return _malformed(target.channel)


def _malformed(channel: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream channel `{channel}` sent a reply that is not a JSON object."
    )
