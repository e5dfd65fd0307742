"""Images over OpenAI's wire format (OpenAI, vLLM and other compatible servers, Azure
OpenAI through its ``Endpoint``).

A generation is ``POST /images/generations`` (JSON); an edit ``POST /images/edits``
(``multipart/form-data``: the images as ``image``, or each as ``image[]`` when there are
several, then ``mask``), with the request's fields as OpenAI names them. ``response_format``
is sent only when the caller gave it, and then as ``b64_json`` (Parley makes its own URLs;
GPT image models refuse the field). An image that comes back as a URL (DALL·E's default)
is fetched (``providers/pictures.py``).

A stream is OpenAI's ``image_generation.*`` (or ``image_edit.*``) events: each
``partial_image`` becomes a ``PartialImage`` and each ``completed`` an ``ImageReply``
with its usage. An error event (``error`` key, or ``type: error``) ends it as the
upstream's failure; a body that ends before any ``completed`` event is cut short. An
event carries a whole image, so it is bounded by ``max_reply_bytes`` (not the smaller
``max_event_bytes`` of chat chunks).
"""

from __future__ import annotations

import io
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import orjson

from parley import upstream_json
from parley.domain.wire import JSON
from parley.errors import UpstreamError
from parley.http import HttpClient, Reply
from parley.http.multipart import FilePart, MultipartBody
from parley.providers.base import (
    ImageEvent,
    ImageInput,
    ImageReply,
    ImageRequest,
    PartialImage,
    Picture,
    ReplyBounds,
    Target,
    stream_cut_short,
    upstream_errors,
)
from parley.providers.openai.adapter import BEARER, Endpoint
from parley.providers.openai.answers import check_stream_start, whole_reply
from parley.providers.openai.refusal import stream_failure
from parley.providers.pictures import decoded, fetched
from parley.sse import EventTooLarge, SseParser

GENERATIONS_PATH = "/images/generations"
EDITS_PATH = "/images/edits"
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}
ECHOED = ("size", "quality", "background", "output_format")


class OpenAIImages:
    """``Images`` over the process's one ``HttpClient``, replies within ``bounds``."""

    __slots__ = ("_bounds", "_endpoint", "_http")

    def __init__(
        self, http: HttpClient, bounds: ReplyBounds | None = None, endpoint: Endpoint = BEARER
    ) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._endpoint = endpoint

    async def images(self, target: Target, request: ImageRequest) -> ImageReply:
        limit = self._bounds.max_reply_bytes
        reply = await whole_reply(self._send(target, request, stream=False), target, limit)
        return await self._read(target, reply)

    def images_stream(
        self, target: Target, request: ImageRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[Sequence[ImageEvent]]]:
        return self._stream(target, request)

    @asynccontextmanager
    async def _stream(
        self, target: Target, request: ImageRequest
    ) -> AsyncIterator[AsyncIterator[Sequence[ImageEvent]]]:
        limit = self._bounds.max_reply_bytes
        with upstream_errors(target.channel):
            response = await self._send(target, request, stream=True)
            await check_stream_start(response, target, limit, _is_error, stream_failure)
        # an event holds a whole image: bounded like a whole reply, not like a chat chunk
        events = _events(response, target, self._bounds.max_reply_bytes)
        try:
            yield events
        finally:
            await events.aclose()
            response.release()

    async def _read(self, target: Target, reply: JSON) -> ImageReply:
        data = reply.get("data")
        if not isinstance(data, list) or not data:
            raise UpstreamError(f"The upstream channel `{target.channel}` sent no images.")
        pictures = []
        for item in data:
            if not isinstance(item, dict):
                raise UpstreamError(f"The upstream channel `{target.channel}` sent no images.")
            revised = item.get("revised_prompt")
            if item.get("b64_json") is not None:
                pictures.append(decoded(target.channel, item["b64_json"], revised))
            else:
                limit = self._bounds.max_reply_bytes
                url = item.get("url")
                pictures.append(await fetched(self._http, target, url, limit, revised))
        return _reply(reply, tuple(pictures))

    def _send(self, target: Target, request: ImageRequest, *, stream: bool) -> Awaitable[Reply]:
        fields = _fields(target, request, stream=stream)
        timeout = target.stream_timeout if stream else target.read_timeout
        if not request.edit:
            head = self._endpoint.head(target, GENERATIONS_PATH)
            return self._http.send(
                head,
                orjson.dumps(dict(fields)),
                connect_timeout=target.connect_timeout,
                read_timeout=timeout,
            )
        name = "image" if len(request.inputs) == 1 else "image[]"
        files = [_part(name, image, index) for index, image in enumerate(request.inputs)]
        if request.mask is not None:
            files.append(_part("mask", request.mask, 0))
        body = MultipartBody([(key, _text(value)) for key, value in fields], *files)
        head = self._endpoint.head(target, EDITS_PATH, body.content_type)
        return self._http.send(
            head, body, connect_timeout=target.connect_timeout, read_timeout=timeout
        )


def _fields(target: Target, request: ImageRequest, *, stream: bool) -> list[tuple[str, object]]:
    """The request's fields as OpenAI names them, those the caller left out omitted."""
    fields: list[tuple[str, object]] = [("model", target.model), ("prompt", request.prompt)]
    fields.append(("n", request.n))
    for name in ("size", "quality", "background", "output_format", "output_compression"):
        value = getattr(request, name)
        if value is not None:
            fields.append((name, value))
    if request.url_reply is not None:
        fields.append(("response_format", "b64_json"))
    fields.extend(request.options)
    if stream:
        fields.append(("stream", True))
        if request.partial_images is not None:
            fields.append(("partial_images", request.partial_images))
    return fields


def _text(value: object) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


def _part(name: str, image: ImageInput, index: int) -> FilePart:
    stem = "mask" if name == "mask" else f"image-{index + 1}"
    filename = f"{stem}.{EXTENSIONS.get(image.media_type, 'png')}"
    return FilePart(name, filename, image.media_type, io.BytesIO(image.data))


def _reply(reply: JSON, pictures: tuple[Picture, ...]) -> ImageReply:
    size, quality, background, output_format = (
        value if isinstance(value := reply.get(name), str) else None for name in ECHOED
    )
    usage = reply.get("usage")
    return ImageReply(
        pictures,
        size,
        quality,
        background,
        output_format,
        usage if isinstance(usage, dict) else None,
    )


def _is_error(reply: JSON) -> bool:
    return "error" in reply


async def _events(
    response: Reply, target: Target, max_event_bytes: int
) -> AsyncGenerator[list[ImageEvent], None]:
    """Partial and finished images from OpenAI's image events, a batch per read."""
    channel = target.channel
    parser = SseParser(max_event_bytes)
    finished = False
    with upstream_errors(channel):
        async for data in response.pieces():
            try:
                events, too_large = parser.feed(data), None
            except EventTooLarge as error:
                events, too_large = error.events, error
            batch: list[ImageEvent] = []
            failure: UpstreamError | None = None
            for event in events:
                if event.data == "[DONE]":
                    continue
                try:
                    found = _event(channel, event.data, target.api_key)
                except UpstreamError as error:  # what came before it is owed first
                    failure = error
                    break
                if found is not None:
                    finished = finished or isinstance(found, ImageReply)
                    batch.append(found)
            if batch:
                yield batch
            if failure is not None:
                raise failure
            if too_large is not None:
                raise too_large
    if not finished:
        raise stream_cut_short(channel)


def _event(channel: str, payload: str, secret: str | None) -> ImageEvent | None:
    try:
        event = upstream_json.loads(payload)
    except orjson.JSONDecodeError:
        event = None
    if not isinstance(event, dict):
        raise UpstreamError(f"The upstream channel `{channel}` sent an event that is not JSON.")
    kind = event.get("type")
    if "error" in event or kind == "error":
        envelope = event if isinstance(event.get("error"), dict) else {"error": event}
        raise stream_failure(channel, envelope, secret)
    if not isinstance(kind, str):
        return None
    if kind.endswith(".partial_image"):
        picture = decoded(channel, event.get("b64_json"))
        index = event.get("partial_image_index")
        return PartialImage(picture.data, picture.media_type, index if type(index) is int else 0)
    if kind.endswith(".completed"):
        return _reply(event, (decoded(channel, event.get("b64_json")),))
    return None
