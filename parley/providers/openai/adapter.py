"""The adapter for upstreams that speak OpenAI's wire format (OpenAI, vLLM, Ollama, llama.cpp,
Azure OpenAI).

The canonical request already is this format, so the adapter only names the upstream's
model, asks streams for their usage, calls, and maps failures to the error tree. Replies
are returned as the upstream sent them; the caller rewrites ``model`` for its own caller.
Where a request goes and how it authenticates is its ``Endpoint``: ``BEARER`` (the
base URL and the path, the key as ``Authorization: Bearer``) unless another is given
(``providers/azure/``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Protocol, TypeVar, cast

import orjson

from parley import upstream_json
from parley.dialects.translator import ChunkTranslator, Translator
from parley.domain.wire import JSON
from parley.errors import UpstreamError
from parley.http import HttpClient, Prepared, Reply, prepare
from parley.providers.base import Batches, ReplyBounds, Target, upstream_errors, upstream_failure
from parley.providers.openai.answers import (
    check_stream_start,
    faults,
    malformed,
    stream_start,
    whole_reply,
)
from parley.providers.openai.refusal import stream_failure
from parley.providers.shapes import Item, SameShape, Shape, ShapedBatches, learn
from parley.providers.translated import TranslatedStream
from parley.sse import EventTooLarge, SseParser

T = TypeVar("T")

CHAT_PATH = "/chat/completions"
COMPLETION_PATH = "/completions"
EMBEDDINGS_PATH = "/embeddings"
RESPONSES_PATH = "/responses"
_DONE = "[DONE]"
_DONE_BYTES = b"[DONE]"
TRIES = 4
"""One-event reads in a row the shape did not take that a stream may learn from (the
role chunk and the first text chunk take two), before it stops trying: an upstream whose
every chunk differs (OpenAI's ``obfuscation``) or that sends no text stops paying for it.
Each read the shape takes sets it back, so a shape that changes now and then (a new id,
llama.cpp's ``created`` each second) is learned again."""


class Endpoint(Protocol):
    """Where an OpenAI-shaped request for ``target`` goes, and with what credentials."""

    def head(self, target: Target, path: str) -> Prepared:
        """The request head for the operation at ``path`` (``/chat/completions``...)."""


class BearerEndpoint:
    """``{base_url}{path}``, the channel's key as ``Authorization: Bearer``."""

    __slots__ = ()

    def head(self, target: Target, path: str) -> Prepared:
        return _request(target.base_url, path, target.api_key)


BEARER = BearerEndpoint()


class OpenAIAdapter:
    """``Chat``, ``Completion`` and ``Embeddings`` over the process's one ``HttpClient``,
    accepting replies and streamed events within ``bounds``, calling ``endpoint``."""

    __slots__ = ("_bounds", "_endpoint", "_http")

    def __init__(
        self, http: HttpClient, bounds: ReplyBounds | None = None, endpoint: Endpoint = BEARER
    ) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._endpoint = endpoint

    def chat(self, target: Target, body: JSON) -> Awaitable[JSON]:
        return self._reply(target, CHAT_PATH, body)  # no coroutine of its own on the way

    def chat_stream(
        self, target: Target, body: JSON, *, shapes: bool = False
    ) -> AbstractAsyncContextManager[ShapedBatches]:
        return _Stream(self, target, CHAT_PATH, body, shapes=shapes)

    def chat_translated(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        """A chat stream's bytes fed to ``translator`` (a caller of another dialect)."""
        bounds = self._bounds

        def send() -> Awaitable[Reply]:
            return self._post(target, CHAT_PATH, stream_body(body, target.model))

        start = stream_start(target, bounds.max_reply_bytes, _is_error, stream_failure)
        return TranslatedStream(
            target.channel, send, start, translator, faults(target, stream_failure)
        )

    def responses(self, target: Target, body: JSON) -> Awaitable[JSON]:
        """A whole ``response`` from an upstream that serves the Responses API."""
        return self._reply(target, RESPONSES_PATH, body)

    def responses_stream(
        self, target: Target, body: JSON, translator: Translator[T]
    ) -> TranslatedStream[T]:
        """A Responses stream's bytes fed to ``translator`` (``ResponsesRelay``)."""
        payload = {**body, "model": target.model, "stream": True}

        def send() -> Awaitable[Reply]:
            return self._post(target, RESPONSES_PATH, payload, stream=True)

        start = stream_start(target, self._bounds.max_reply_bytes, _is_error, stream_failure)
        return TranslatedStream(
            target.channel, send, start, translator, faults(target, stream_failure)
        )

    def completion(self, target: Target, body: JSON) -> Awaitable[JSON]:
        return self._reply(target, COMPLETION_PATH, body)

    def completion_stream(self, target: Target, body: JSON) -> AbstractAsyncContextManager[Batches]:
        stream = _Stream(self, target, COMPLETION_PATH, body, shapes=False)
        return cast("AbstractAsyncContextManager[Batches]", stream)  # no shapes: chunks only

    def embeddings(self, target: Target, body: JSON) -> Awaitable[JSON]:
        return self._reply(target, EMBEDDINGS_PATH, body)

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


def _is_error(reply: JSON) -> bool:
    return "error" in reply


class _Stream:
    """One stream on one route (``AbstractAsyncContextManager[Batches]``): entering sends
    the request and checks that the upstream streams; leaving releases the connection.
    What ``@asynccontextmanager`` did, written out (it cost every stream a generator and
    its context object)."""

    __slots__ = ("_adapter", "_body", "_path", "_reply", "_shapes", "_target")

    def __init__(
        self,
        adapter: OpenAIAdapter,
        target: Target,
        path: str,
        body: JSON,
        *,
        shapes: bool,
    ) -> None:
        self._adapter = adapter
        self._target = target
        self._path = path
        self._body = body
        self._shapes = shapes
        self._reply: Reply | None = None

    async def __aenter__(self) -> ShapedBatches:
        target, adapter = self._target, self._adapter
        bounds = adapter._bounds
        with upstream_errors(target.channel):
            payload = stream_body(self._body, target.model)
            reply = self._reply = await adapter._post(target, self._path, payload, stream=True)
        try:
            with upstream_errors(target.channel):
                await check_stream_start(
                    reply, target, bounds.max_reply_bytes, _is_error, stream_failure
                )
        except BaseException:
            self._reply = None
            reply.release()
            raise
        return _Chunks(reply, target, bounds.max_event_bytes, self._shapes)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        reply, self._reply = self._reply, None
        if reply is not None:
            reply.release()


class _Chunks:
    """``Batches``: the ``data:`` events of each read from the upstream, as dicts, until
    ``[DONE]``. What arrived before an error event, an oversized event or ``[DONE]`` in
    the same read is returned first; the end comes at the next call. Asked for shapes, a
    one-event read of the stream's learned shape comes as a ``SameShape`` instead, in a
    batch of its own (``providers/shapes.py``).

    It runs once per upstream read, so it is lean: an async iterator written out (one
    coroutine a read, where an async generator over ``Reply.pieces`` took two generators'
    steps), and whole ``data:`` events (``SseParser.whole_data``) go to ``orjson`` as
    bytes, with the rules for anything unusual in ``_chunk``.
    """

    __slots__ = ("_channel", "_end", "_limit", "_parser", "_reply", "_secret", "_shape", "_tries")

    def __init__(self, reply: Reply, target: Target, max_event_bytes: int, shapes: bool) -> None:
        self._reply = reply
        self._channel = target.channel
        self._secret = target.api_key
        self._parser = SseParser(max_event_bytes)
        self._limit = max_event_bytes
        self._end: UpstreamError | str | None = None
        """What ended the stream: ``_DONE`` (or the body's end), or the error to raise."""
        self._shape: Shape | None = None
        """The content chunks' learned shape (``providers/shapes.py``), while it holds."""
        self._tries = TRIES if shapes else 0
        """One-event reads the stream may still try to learn a shape from (none unless the
        caller asked for shapes); set back whenever the shape takes a read."""

    def __aiter__(self) -> _Chunks:
        return self

    async def __anext__(self) -> list[Item]:
        while self._end is None:
            try:
                data = await self._reply.next_piece()
            except Exception as error:
                failure = upstream_failure(self._channel, error)
                if failure is None:
                    raise
                raise failure from None
            if not data:
                self._end = _DONE
                break
            batch = self._batch(data)
            if batch:
                return batch
        end = self._end
        if isinstance(end, UpstreamError):
            self._end = _DONE
            raise end
        raise StopAsyncIteration

    def _batch(self, data: bytes) -> list[Item]:
        """The chunks one read completed; what ended the stream among them goes to
        ``_end``."""
        shape = self._shape
        # The learned shape's read: ``data: H"...."T`` and the blank line, nothing else.
        # Only the literal between the quotes is parsed; if it is not exactly one JSON
        # string, the read goes the way below and is judged by its rules. The parser is
        # left as ``whole_data`` would leave it (a shape is kept only while every read is
        # whole events), so it is not called.
        if (
            shape is not None
            and data.startswith(shape.head)
            and data.endswith(shape.tail)
            and len(data) <= self._limit
        ):
            literal = data[shape.start : len(data) - shape.end]
            try:
                text = orjson.loads(literal)
            except orjson.JSONDecodeError:
                text = None
            if type(text) is str:
                self._tries = TRIES
                return [SameShape(shape, literal, text)]
        parser = self._parser
        payloads = parser.whole_data(data)
        if payloads is None:
            self._shape = None
            return self._parsed(data, parser, [])
        return self._whole(payloads)

    def _whole(self, payloads: list[bytes]) -> list[Item]:
        """``_batch`` for a read of whole ``data:`` events, each parsed; a one-event read's
        chunk may teach the stream its shape."""
        batch: list[Item] = []
        loads, shallow = orjson.loads, upstream_json.SHALLOW_BYTES
        for payload in payloads:
            if payload == _DONE_BYTES:
                self._end = _DONE
                return batch
            try:
                chunk: Any = loads(payload)
            except orjson.JSONDecodeError:
                chunk = None
            # ``upstream_json.loads``, written out: a chunk too deep to write back goes
            # to ``_chunk``, which refuses it.
            if (
                type(chunk) is not dict
                or "error" in chunk
                or (len(payload) > shallow and upstream_json.too_deep(payload))
            ):
                chunk = self._chunk(payload, named_error=False)
                if chunk is None:
                    if self._end is not None:
                        return batch
                    continue
            batch.append(chunk)
        if self._tries and len(payloads) == 1 and batch:
            self._learn(payloads[0], batch[0])
        return batch

    def _learn(self, payload: bytes, chunk: Item) -> None:
        """Learn the shape of a one-event read's chunk, which the learned shape (if any)
        did not take: the first text chunk, or one whose head or tail changed (a new id, a
        per-second ``created``). Not from reads of several events, which the shape would
        not take anyway."""
        self._tries -= 1
        if type(chunk) is dict:
            self._shape = learn(payload, chunk) or self._shape

    def _parsed(self, data: bytes, parser: SseParser, batch: list[Item]) -> list[Item]:
        """``_batch`` for a read ``whole_data`` did not take (partial lines, CR line ends,
        comments, named events), through the full parser."""
        try:
            events, too_large = parser.feed(data), None
        except EventTooLarge as error:
            events, too_large = error.events, error
        for event in events:
            chunk = self._chunk(event.data, named_error=event.event == "error")
            if chunk is not None:
                batch.append(chunk)
            elif self._end is not None:
                return batch
        if too_large is not None:
            self._end = upstream_failure(self._channel, too_large)
        return batch

    def _chunk(self, data: bytes | str, *, named_error: bool) -> JSON | None:
        """One event's chunk, by every rule: ``None`` for an event to skip (blank data), or
        when it ended the stream (``[DONE]``; an error event, or a malformed one: the
        ``UpstreamError`` it means), which is then in ``_end``."""
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        if text == _DONE:
            self._end = _DONE
            return None
        if not text or text.isspace():
            return None
        try:
            chunk = upstream_json.loads(text)
        except orjson.JSONDecodeError:
            chunk = None
        if not isinstance(chunk, dict):
            self._end = malformed(self._channel)
            return None
        if "error" in chunk or named_error:
            self._end = stream_failure(self._channel, chunk, self._secret)
            return None
        return chunk
