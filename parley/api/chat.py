"""POST /v1/chat/completions."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from aiohttp import web

from parley.api.apart import Large, Later, read_chat
from parley.api.body import decode_json, read_raw
from parley.api.chat_request import Images, check_images, parse_chat
from parley.api.textgen import TextReply, TextRequest, TextStream
from parley.dialects import openai_chat, openai_chat_reply
from parley.dialects.call import OPENAI_CHAT, ChatCall, passes_through
from parley.domain.models import CHAT_KINDS, Resolved
from parley.domain.wire import JSON
from parley.pipeline import runner
from parley.pipeline.context import CALLER, services
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.providers import base as capability
from parley.providers.base import Translations


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


def chat_call(text: TextRequest) -> ChatCall:
    """The canonical call of a chat body, for a route that translates it: the body as
    sent, its ``Request`` read from it (``dialects/openai_chat.py``) on first use, and
    never for a large body (its translation is written in a body process:
    ``api/apart.py``). A route that passes the call through is given the body alone."""
    return ChatCall(OPENAI_CHAT, text.body, openai_chat.decode_request)


class ChatReply(TextReply):
    """A whole chat completion: the upstream's, passed through, or a canonical reply
    written as one."""

    __slots__ = ("_images", "_large")
    operation = CHAT
    id_prefix = "chatcmpl-"

    def __init__(
        self, text: TextRequest, svc: Services, images: Images | None, large: Large | None
    ) -> None:
        TextReply.__init__(self, text, svc)
        self._images = images
        self._large = large

    def check(self, model: Resolved) -> None:
        _check(self._text, self._images, model, self._settings.server.max_image_bytes)

    def call(self, route: Route) -> Awaitable[JSON]:
        adapter = self._providers.serving(capability.CHAT, route.provider_type)
        if passes_through(OPENAI_CHAT, adapter.speaks(route.target)):
            return adapter.relay(route.target, OPENAI_CHAT, self._text.body, None)
        return self._translated(adapter, route)

    async def _translated(self, adapter: capability.Chat, route: Route) -> JSON:
        call = chat_call(self._text)
        large = self._large
        if large is not None:  # written for the route's upstream in a body process
            codec = self._providers.codec(route.provider_type, route.target)
            call = await large.written(call, codec, route.target)
        return openai_chat_reply.encode_reply(await adapter.generate(route.target, call))

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
        TextStream.__init__(self, text, svc)
        self._images = images
        self._large = large

    def check(self, model: Resolved) -> None:
        _check(self._text, self._images, model, self._settings.server.max_image_bytes)

    def open(self, route: Route) -> Translations[bytes]:
        """The relay is fed the upstream's bytes passed through, or the chat chunks a
        translating adapter's reader made (``OpenAIRelay`` takes both)."""
        adapter = self._providers.serving(capability.CHAT, route.provider_type)
        target, relay = route.target, self.relay()
        if passes_through(OPENAI_CHAT, adapter.speaks(target)):
            return adapter.relay_stream(target, OPENAI_CHAT, self._text.body, None, relay)
        call, large = chat_call(self._text), self._large
        if large is None:
            return adapter.generate_stream(target, call, relay)
        codec = self._providers.codec(route.provider_type, target)
        return Later(
            lambda: large.written(call, codec, target),
            lambda ready: adapter.generate_stream(target, ready, relay),
        )


def _check(text: TextRequest, images: Images | None, model: Resolved, max_bytes: int) -> None:
    """The body's images held against the model: found here for a small body, in the
    body process for a large one."""
    if images is None:
        check_images(text.body, model, max_bytes)
    else:
        images.check(model)
