"""The adapter for upstreams that speak OpenAI's wire format (OpenAI, vLLM, Ollama, llama.cpp).

The canonical request already is this format, so the adapter only names the upstream's
model, asks streams for their usage, calls, and maps failures to the error tree. Replies
are returned as the upstream sent them; the caller rewrites ``model`` for its own caller.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import orjson

from parley.errors import UpstreamError
from parley.http import HttpClient, Prepared, Reply, prepare
from parley.providers.base import JSON, Batches, ReplyBounds, Target, upstream_errors
from parley.providers.openai.refusal import refusal, stream_failure
from parley.sse import EventTooLarge, SseEvent, SseParser

CHAT_PATH = "/chat/completions"
COMPLETION_PATH = "/completions"
EMBEDDINGS_PATH = "/embeddings"
_DONE = "[DONE]"


class OpenAIAdapter:
    """``Chat``, ``Completion`` and ``Embeddings`` over the process's one ``HttpClient``,
    accepting replies and streamed events within ``bounds``."""

    __slots__ = ("_bounds", "_http")

    def __init__(self, http: HttpClient, bounds: ReplyBounds | None = None) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()

    async def chat(self, target: Target, body: JSON) -> JSON:
        return await self._reply(target, CHAT_PATH, body)

    def chat_stream(self, target: Target, body: JSON) -> AbstractAsyncContextManager[Batches]:
        return self._stream(target, CHAT_PATH, body)

    async def completion(self, target: Target, body: JSON) -> JSON:
        return await self._reply(target, COMPLETION_PATH, body)

    def completion_stream(self, target: Target, body: JSON) -> AbstractAsyncContextManager[Batches]:
        return self._stream(target, COMPLETION_PATH, body)

    async def embeddings(self, target: Target, body: JSON) -> JSON:
        return await self._reply(target, EMBEDDINGS_PATH, body)

    async def _reply(self, target: Target, path: str, body: JSON) -> JSON:
        with upstream_errors(target.channel):
            response = await self._post(target, path, plain_body(body, target.model))
            raw = await response.read(self._bounds.max_reply_bytes)
            if response.status >= 300:
                raise refusal(target.channel, response.status, raw, target.api_key)
            reply = orjson.loads(raw)
        if not isinstance(reply, dict):
            raise _malformed(target.channel)
        return reply

    @asynccontextmanager
    async def _stream(self, target: Target, path: str, body: JSON) -> AsyncIterator[Batches]:
        with upstream_errors(target.channel):
            response = await self._post(target, path, stream_body(body, target.model))
        batches = _batches(response, target, self._bounds.max_event_bytes)
        try:
            with upstream_errors(target.channel):
                await _check_stream_start(response, target, self._bounds.max_reply_bytes)
            yield batches
        finally:
            await batches.aclose()
            response.release()

    async def _post(self, target: Target, path: str, payload: JSON) -> Reply:
        return await self._http.send(
            _request(target.base_url, path, target.api_key),
            orjson.dumps(payload),
            connect_timeout=target.connect_timeout,
            read_timeout=target.read_timeout,
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
        raise refusal(channel, response.status, await response.read(limit), target.api_key)
    if response.content_type == "text/event-stream":
        return
    reply = orjson.loads(await response.read(limit))
    if isinstance(reply, dict) and "error" in reply:
        raise stream_failure(channel, reply, target.api_key)
    raise UpstreamError(f"The upstream channel `{channel}` did not stream its reply.")


async def _batches(
    response: Reply, target: Target, max_event_bytes: int
) -> AsyncGenerator[list[JSON], None]:
    """The ``data:`` events of each read from the upstream, as dicts, until ``[DONE]``.

    What arrived before an error event, an oversized event or ``[DONE]`` in the same
    read is yielded first.
    """
    parser = SseParser(max_event_bytes)
    with upstream_errors(target.channel):
        async for data in response.pieces():
            try:
                events, too_large = parser.feed(data), None
            except EventTooLarge as error:
                events, too_large = error.events, error
            batch, end = _decode(events, target)
            if batch:
                yield batch
            if isinstance(end, UpstreamError):
                raise end
            if end is not None:
                return
            if too_large is not None:
                raise too_large


def _decode(
    events: Iterable[SseEvent], target: Target
) -> tuple[list[JSON], UpstreamError | str | None]:
    """The chunks of some events, and what ended the stream among them, if anything:
    ``_DONE``, or the ``UpstreamError`` an error event or a malformed event means."""
    batch: list[JSON] = []
    channel = target.channel
    for event in events:
        data = event.data
        if data == _DONE:
            return batch, _DONE
        if not data or data.isspace():
            continue
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return batch, _malformed(channel)
        if not isinstance(chunk, dict):
            return batch, _malformed(channel)
        if "error" in chunk or event.event == "error":
            return batch, stream_failure(channel, chunk, target.api_key)
        batch.append(chunk)
    return batch, None


def _malformed(channel: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream channel `{channel}` sent a reply that is not a JSON object."
    )
