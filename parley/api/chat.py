"""POST /v1/chat/completions."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from aiohttp import web

from parley.api.body import read_json, required_string
from parley.api.textgen import TextReply, TextRequest, TextStream, text_request
from parley.dialects import openai_chat, openai_chat_reply
from parley.dialects.call import OPENAI_CHAT, ChatCall, passes_through
from parley.dialects.canonical import Reply
from parley.domain.models import CHAT_KINDS, Resolved
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, PayloadTooLarge
from parley.pipeline import runner
from parley.pipeline.context import services
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.providers import base as capability
from parley.providers.base import Translations

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


def _message_text(reply: dict[str, Any]) -> str:
    texts = []
    for choice in reply.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            texts.append(message["content"])
    return "".join(texts)


CHAT = Operation("chat completions", "/v1/chat/completions", CHAT_KINDS)


async def create_chat_completion(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    text = parse_chat(body, len(await request.read()))  # the body read once, kept by aiohttp
    svc = services(request)
    if text.stream:
        return await runner.stream(request, ChatStream(text, svc))
    return await runner.reply(request, ChatReply(text, svc))


def chat_call(text: TextRequest) -> ChatCall:
    """The canonical call of a chat body, for a route that translates it: the body as
    sent, its ``Request`` read from it (``dialects/openai_chat.py``) on first use. A
    route that passes the call through is given the body alone."""
    return ChatCall(OPENAI_CHAT, text.body, openai_chat.decode_request)


class ChatReply(TextReply):
    """A whole chat completion: the upstream's, passed through, or a canonical reply
    written as one."""

    __slots__ = ()
    operation = CHAT
    id_prefix = "chatcmpl-"

    def check(self, model: Resolved) -> None:
        check_images(self._text.body, model, self._settings.server.max_image_bytes)

    def call(self, route: Route) -> Awaitable[JSON]:
        adapter = self._providers.serving(capability.CHAT, route.provider_type)
        if passes_through(OPENAI_CHAT, adapter.speaks(route.target)):
            return adapter.relay(route.target, OPENAI_CHAT, self._text.body, None)
        return _written(adapter.generate(route.target, chat_call(self._text)))

    def produced(self, reply: JSON) -> str:
        return _message_text(reply)


class ChatStream(TextStream):
    """A streamed chat completion, its one-event reads relayed by their learned shape."""

    __slots__ = ()
    operation = CHAT
    id_prefix = "chatcmpl-"
    chunk_object = "chat.completion.chunk"
    shapes = True

    def check(self, model: Resolved) -> None:
        check_images(self._text.body, model, self._settings.server.max_image_bytes)

    def open(self, route: Route) -> Translations[bytes]:
        """The relay is fed the upstream's bytes passed through, or the chat chunks a
        translating adapter's reader made (``OpenAIRelay`` takes both)."""
        adapter = self._providers.serving(capability.CHAT, route.provider_type)
        if passes_through(OPENAI_CHAT, adapter.speaks(route.target)):
            body = self._text.body
            return adapter.relay_stream(route.target, OPENAI_CHAT, body, None, self.relay())
        return adapter.generate_stream(route.target, chat_call(self._text), self.relay())


async def _written(reply: Awaitable[Reply]) -> JSON:
    """A canonical reply as a ``chat.completion``."""
    return openai_chat_reply.encode_reply(await reply)


def parse_chat(body: dict[str, Any], body_bytes: int) -> TextRequest:
    model = required_string(body, "model")
    messages = body.get("messages")
    if messages is None:
        raise InvalidRequest("Missing required parameter: 'messages'.", param="messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array.", param="messages")
    for index, message in enumerate(messages):
        _check_message(message, index)
    return text_request(
        body,
        model=model,
        prompt_estimate=openai_chat.estimate_messages(messages),
        body_bytes=body_bytes,
        images=openai_chat.count_images(messages),
        length_fields=("max_tokens", "max_completion_tokens"),
    )


def _check_message(message: Any, index: int) -> None:
    param = f"messages[{index}]"
    if not isinstance(message, dict):
        raise InvalidRequest(f"'{param}' must be an object with 'role' and 'content'.", param=param)
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        allowed = ", ".join(sorted(ROLES))
        raise InvalidRequest(f"'{param}.role' must be one of: {allowed}.", param=f"{param}.role")
    content = message.get("content")
    if content is None:
        if role == "assistant" and (message.get("tool_calls") or message.get("function_call")):
            return
        raise InvalidRequest(
            f"Missing required parameter: '{param}.content'.", param=f"{param}.content"
        )
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InvalidRequest(
            f"'{param}.content' must be a string or an array of content parts.",
            param=f"{param}.content",
        )
    for part_index, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            where = f"{param}.content[{part_index}]"
            raise InvalidRequest(f"'{where}' must be an object with a 'type'.", param=where)


def check_images(body: dict[str, Any], model: Resolved, max_bytes: int) -> None:
    """Images only for vision models, and a data-URL image no larger than ``max_bytes``."""
    for index, message in enumerate(body["messages"]):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part_index, part in enumerate(content):
            if part.get("type") != "image_url":
                continue
            where = f"messages[{index}].content[{part_index}]"
            if not model.spec.vision:
                raise InvalidRequest(
                    f"The model `{model.requested}` does not accept images; "
                    "use a vision-capable model.",
                    param=where,
                    code="image_not_supported",
                )
            _check_image_size(part, where, max_bytes)


def _check_image_size(part: dict[str, Any], where: str, max_bytes: int) -> None:
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str) or not url:
        raise InvalidRequest(f"'{where}.image_url.url' must be a URL or a data URL.", param=where)
    if not url.startswith("data:"):
        return
    header, _, data = url.partition(",")
    if ";base64" not in header:
        raise InvalidRequest(f"'{where}' must be a base64 data URL.", param=where)
    size = len(data) * 3 // 4 - data[-2:].count("=")
    if size > max_bytes:
        raise PayloadTooLarge(
            f"The image at {where} is {size} bytes; the limit is {max_bytes} bytes. "
            "Downscale the image and try again.",
            param=where,
            code="image_too_large",
        )
