"""The adapter for upstreams that speak OpenAI's wire format (OpenAI, vLLM, Ollama, llama.cpp).

The canonical request already is this format, so the adapter only names the upstream's
model, asks streams for their usage, calls, and maps failures to the error tree. Replies
are returned as the upstream sent them; the caller rewrites ``model`` for its own caller.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import aiohttp
import orjson

from parley.errors import UpstreamError
from parley.providers.base import JSON, Target, upstream_errors
from parley.providers.openai.refusal import refusal, stream_failure
from parley.sse import SseEvent, SseParser

CHAT_PATH = "/chat/completions"
COMPLETION_PATH = "/completions"
_DONE = "[DONE]"


class OpenAIAdapter:
    """``Chat`` and ``Completion`` over one shared ``aiohttp.ClientSession``."""

    __slots__ = ("_session",)

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def chat(self, target: Target, body: JSON) -> JSON:
        return await self._reply(target, CHAT_PATH, body)

    def chat_stream(
        self, target: Target, body: JSON
    ) -> AbstractAsyncContextManager[AsyncIterator[JSON]]:
        return self._stream(target, CHAT_PATH, body)

    async def completion(self, target: Target, body: JSON) -> JSON:
        return await self._reply(target, COMPLETION_PATH, body)

    def completion_stream(
        self, target: Target, body: JSON
    ) -> AbstractAsyncContextManager[AsyncIterator[JSON]]:
        return self._stream(target, COMPLETION_PATH, body)

    async def _reply(self, target: Target, path: str, body: JSON) -> JSON:
        with upstream_errors(target.channel):
            async with await self._post(target, path, plain_body(body, target.model)) as response:
                raw = await response.read()
                if response.status >= 300:
                    raise refusal(target.channel, response.status, raw)
                reply = orjson.loads(raw)
        if not isinstance(reply, dict):
            raise _malformed(target.channel)
        return reply

    @asynccontextmanager
    async def _stream(
        self, target: Target, path: str, body: JSON
    ) -> AsyncIterator[AsyncIterator[JSON]]:
        with upstream_errors(target.channel):
            response = await self._post(target, path, stream_body(body, target.model))
        chunks = _chunks(response, target.channel)
        try:
            with upstream_errors(target.channel):
                await _check_stream_start(response, target.channel)
            yield chunks
        finally:
            await chunks.aclose()
            _finish(response)

    async def _post(self, target: Target, path: str, payload: JSON) -> aiohttp.ClientResponse:
        return await self._session.post(
            f"{target.base_url}{path}",
            data=orjson.dumps(payload),
            headers=_headers(target.api_key),
            timeout=_timeout(target.connect_timeout, target.read_timeout),
            allow_redirects=False,
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
def _timeout(connect: float, read: float) -> aiohttp.ClientTimeout:
    """One immutable timeout per channel setting, not one object per call."""
    return aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)


@functools.cache
def _headers(api_key: str | None) -> dict[str, str]:
    """Built once per channel key (aiohttp copies them; they are never mutated)."""
    if api_key:
        return {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"}
    return {"Content-Type": "application/json"}


async def _check_stream_start(response: aiohttp.ClientResponse, channel: str) -> None:
    """Raise if the upstream refused, or answered without streaming."""
    if response.status >= 300:
        raise refusal(channel, response.status, await response.read())
    if response.content_type == "text/event-stream":
        return
    reply = orjson.loads(await response.read())
    if isinstance(reply, dict) and "error" in reply:
        raise stream_failure(channel, reply)
    raise UpstreamError(f"The upstream channel `{channel}` did not stream its reply.")


async def _chunks(response: aiohttp.ClientResponse, channel: str) -> AsyncGenerator[JSON, None]:
    """Each ``data:`` event as a dict, as it arrives, until ``[DONE]`` or the body ends."""
    parser = SseParser()
    with upstream_errors(channel):
        async for data in response.content.iter_any():
            for event in parser.feed(data):
                if event.data == _DONE:
                    return
                if event.data and not event.data.isspace():
                    yield _chunk(event, channel)


def _chunk(event: SseEvent, channel: str) -> JSON:
    chunk = orjson.loads(event.data)
    if not isinstance(chunk, dict):
        raise _malformed(channel)
    if "error" in chunk or event.event == "error":
        raise stream_failure(channel, chunk)
    return chunk


def _finish(response: aiohttp.ClientResponse) -> None:
    """Give a fully read connection back to the pool; close one cut short, so the upstream stops."""
    if response.content.is_eof():
        response.release()
    else:
        response.close()


def _malformed(channel: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream channel `{channel}` sent a reply that is not a JSON object."
    )
