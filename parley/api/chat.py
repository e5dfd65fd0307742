"""POST /v1/chat/completions."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from parley.api.apart import Large, Later, read_chat
from parley.api.body import decode_json, read_raw
from parley.api.chat_request import Images, check_images, parse_chat
from parley.api.textgen import TextReply, TextRequest, TextStream
from parley.dialects.outbound import Codec
from parley.domain.models import CHAT_KINDS, Resolved
from parley.domain.wire import JSON
from parley.pipeline import runner
from parley.pipeline.context import CALLER, services
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.providers.base import Translations
from parley.providers.registry import ProviderRegistry


def _message_text(reply: dict[str, Any]) -> str:
    texts = []
    for choice in reply.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            texts.append(message["content"])
    return "".join(texts)


CHAT = Operation("chat completions", "/v1/chat/completions", CHAT_KINDS)


async def create_chat_completion(request: web.Request) -> web.StreamResponse:
    raw = await read_raw(request)
    svc = services(request)
    server = svc.settings.server
    if len(raw) > server.large_body_bytes:  # read, and translated, in a body process
        group = request[CALLER].group.id
        text, images, large = await read_chat(raw, group, svc.bodies, server.max_image_bytes)
    else:
        text, images, large = parse_chat(decode_json(raw), len(raw)), None, None
    if text.stream:
        return await runner.stream(request, ChatStream(text, svc, images, large))
    return await runner.reply(request, ChatReply(text, svc, images, large))


class ChatReply(TextReply):
    """A whole chat completion."""

    __slots__ = ("_images", "_large")
    operation = CHAT
    id_prefix = "chatcmpl-"

    def __init__(
        self, text: TextRequest, svc: Services, images: Images | None, large: Large | None
    ) -> None:
        super().__init__(text, svc)
        self._images = images
        self._large = large

    def check(self, model: Resolved) -> None:
        _check(self._text, self._images, model, self._settings.server.max_image_bytes)

    async def call(self, route: Route) -> JSON:
        adapter = self._providers.chat(route.provider_type)
        codec = _codec(self._large, self._providers, route)
        if codec is None:
            return await adapter.chat(route.target, self._text.body)
        assert self._large is not None
        body = await self._large.translated(self._text.body, codec, route.target.model)
        return await adapter.chat(route.target, body)

    def produced(self, reply: JSON) -> str:
        return _message_text(reply)


class ChatStream(TextStream):
    """A streamed chat completion, its one-event reads relayed by their learned shape."""

    __slots__ = ("_images", "_large")
    operation = CHAT
    id_prefix = "chatcmpl-"
    chunk_object = "chat.completion.chunk"
    shapes = True

    def __init__(
        self, text: TextRequest, svc: Services, images: Images | None, large: Large | None
    ) -> None:
        super().__init__(text, svc)
        self._images = images
        self._large = large

    def check(self, model: Resolved) -> None:
        _check(self._text, self._images, model, self._settings.server.max_image_bytes)

    def open(self, route: Route) -> Translations[bytes]:
        adapter = self._providers.chat_translation(route.provider_type)
        codec = _codec(self._large, self._providers, route)
        large, body, relay = self._large, self._text.body, self.relay()
        if codec is None or large is None:
            return adapter.chat_translated(route.target, body, relay)
        return Later(
            lambda: large.translated(body, codec, route.target.model),
            lambda ready: adapter.chat_translated(route.target, ready, relay),
        )


def _check(text: TextRequest, images: Images | None, model: Resolved, max_bytes: int) -> None:
    """The body's images held against the model: found here for a small body, in the
    body process for a large one."""
    if images is None:
        check_images(text.body, model, max_bytes)
    else:
        images.check(model)


def _codec(large: Large | None, providers: ProviderRegistry, route: Route) -> Codec | None:
    """The codec a large body is translated in for ``route`` (in a body process);
    ``None`` for a small body, or a channel that takes the chat body as it is."""
    if large is None:
        return None
    return providers.codec(route.provider_type, route.target)
