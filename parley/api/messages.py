"""POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API in front.

A Messages call goes through the runner like a chat call (the same admission, rates,
budget, routing and metering); only its jobs differ. On a route whose upstream speaks
Messages (``type: anthropic``, and Claude models on ``type: vertex``) the call is passed
through: the body as it came but for the model (Vertex's differences are its adapter's),
``anthropic-beta`` with it, and the reply (or each event's bytes) as the upstream sent
it, the model renamed. On any other route it is translated once: the body read into the
canonical call (``dialects/anthropic_messages.py``, a field the upstream cannot take is
a 400 naming it), which the route's adapter writes in its upstream's own dialect; the
canonical reply is written back as a ``message``, a stream's chat chunks as Messages
events (``dialects/chat_to_messages.py``). Which of the two a route does is
``dialects.call.passes_through``'s to say.

Errors are in Anthropic's shape (the middleware renders them so for these paths), and a
started stream that fails ends with Anthropic's ``error`` event.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Sequence
from typing import Any

import orjson
from aiohttp import web

from parley.api.body import read_json, sampling
from parley.dialects import anthropic_messages, anthropic_messages_reply
from parley.dialects.call import ANTHROPIC_MESSAGES, ChatCall, passes_through
from parley.dialects.canonical import produced_characters
from parley.dialects.chat_to_messages import ChatToMessages
from parley.dialects.messages_relay import MessagesRelay
from parley.dialects.translator import Translator, estimate
from parley.domain.models import CHAT_KINDS, Resolved
from parley.domain.tokens import prompt_ceiling
from parley.domain.usage import NOTHING, Allowance, Usage, with_estimate
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import services
from parley.pipeline.job import NO_HEADERS, Operation
from parley.pipeline.route import Route
from parley.providers import base as capability
from parley.providers.base import Chat, Translations
from parley.providers.registry import ProviderRegistry

MESSAGES = Operation("messages", "/v1/messages", CHAT_KINDS)
COUNT_TOKENS = Operation("token counting", "/v1/messages/count_tokens", CHAT_KINDS)
ID_PREFIX = "msg_"
ANTHROPIC_MOST_TEMPERATURE = 1.0
"""Anthropic's range of ``temperature`` is 0 to 1 (OpenAI's, 0 to 2)."""


@value
class MessagesRequest:
    """A Messages body, checked as far as any route needs; a translating route reads it
    whole (``canonical``) and refuses what its upstream cannot take."""

    model: str
    body: dict[str, Any]
    stream: bool
    max_tokens: int
    prompt_estimate: int
    beta: str | None
    prompt_ceiling: int = 0
    """The most prompt tokens the body can cost (``domain.tokens.prompt_ceiling``)."""

    def call(self) -> ChatCall:
        """The canonical call: the body as sent, read into a ``Request`` only on a route
        that translates it (``dialects/anthropic_messages.py``)."""
        return ChatCall(
            ANTHROPIC_MESSAGES, self.body, anthropic_messages.decode_request, beta=self.beta
        )


async def create_message(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    body_bytes = len(await request.read())  # the body read once, kept by aiohttp
    messages = parse_messages(body, request.headers.get("anthropic-beta"), body_bytes)
    svc = services(request)
    if messages.stream:
        stream = MessagesStream(messages, svc.providers, svc.settings.upstream.max_event_bytes)
        return await runner.stream(request, stream)
    return await runner.reply(request, MessagesReply(messages, svc.providers))


async def count_tokens(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string.", param="model")
    _require_messages(body)
    counting = MessagesRequest(
        model,
        body,
        False,
        0,
        anthropic_messages.estimate_prompt(body),
        request.headers.get("anthropic-beta"),
    )
    return await runner.reply(request, TokenCount(counting, services(request).providers))


def parse_messages(body: dict[str, Any], beta: str | None, body_bytes: int) -> MessagesRequest:
    """What every route needs checked: the model, ``max_tokens``, ``messages`` and the
    sampling parameters (in Anthropic's ranges); ``body_bytes`` is the size of the JSON
    body (for the prompt's ceiling)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string.", param="model")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise InvalidRequest("'max_tokens' must be a positive integer.", param="max_tokens")
    _require_messages(body)
    sampling(body, ANTHROPIC_MOST_TEMPERATURE)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise InvalidRequest("'stream' must be a boolean.", param="stream")
    estimate = anthropic_messages.estimate_prompt(body)
    ceiling = prompt_ceiling(body_bytes, anthropic_messages.count_images(body.get("messages")))
    return MessagesRequest(model, body, stream, max_tokens, estimate, beta, max(estimate, ceiling))


def _require_messages(body: dict[str, Any]) -> None:
    """Both routes take a conversation: a non-empty array under ``messages``."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array.", param="messages")


@value
class Answer:
    """A whole reply in Anthropic's shape, and what it consumed."""

    body: JSON
    usage: Usage


class _MessagesJob:
    __slots__ = ("_call", "_messages", "_model", "_providers")

    def __init__(self, messages: MessagesRequest, providers: ProviderRegistry) -> None:
        self._messages = messages
        self._providers = providers
        self._model = ""
        self._call = messages.call()

    def _adapter(self, route: Route) -> tuple[Chat, bool]:
        """The route's adapter, and whether it passes the call through."""
        adapter = self._providers.serving(capability.CHAT, route.provider_type)
        return adapter, passes_through(self._call.dialect, adapter.speaks(route.target))

    @property
    def operation(self) -> Operation:
        return MESSAGES

    @property
    def model(self) -> str:
        return self._messages.model

    def accept(self, model: Resolved) -> None:
        if not model.spec.vision and _has_image(self._messages.body.get("messages")):
            raise InvalidRequest(
                f"The model `{model.requested}` does not accept images; "
                "use a vision-capable model.",
                param="messages",
                code="image_not_supported",
            )
        self._model = model.spec.name

    def reservation(self, model: Resolved, caller: Caller) -> int:
        return self._messages.prompt_estimate + self._messages.max_tokens

    def allowance(self, model: Resolved) -> Allowance:
        """Its prompt's ceiling and ``max_tokens``, both within the context window."""
        window = model.spec.context_window
        prompt, output = self._messages.prompt_ceiling, self._messages.max_tokens
        if window is not None:
            prompt, output = min(prompt, window), min(output, window)
        return Allowance(prompt_tokens=prompt, completion_tokens=output)


def _has_image(messages: Any) -> bool:
    return anthropic_messages.count_images(messages) > 0


class MessagesReply(_MessagesJob):
    """A whole message: passed through, or translated from a chat completion."""

    __slots__ = ()

    async def call(self, route: Route) -> Answer:
        messages = self._messages
        adapter, passed = self._adapter(route)
        if passed:
            call = self._call
            body = await adapter.relay(route.target, call.dialect, call.body, call.beta)
            found = anthropic_messages_reply.read_usage(body.get("usage"))
            return Answer(body, with_estimate(found, self._estimated(body.get("content"))))
        reply = await adapter.generate(route.target, self._call)
        usage = with_estimate(
            reply.usage, estimate(messages.prompt_estimate, produced_characters(reply.blocks), 1)
        )
        written = anthropic_messages_reply.encode_reply(reply, usage)
        written["id"] = ID_PREFIX + (reply.id or secrets.token_hex(12))
        return Answer(written, usage)

    def _estimated(self, produced: Any) -> Usage:
        text = orjson.dumps(produced).decode() if produced else ""
        return estimate(self._messages.prompt_estimate, len(text), 1)

    def usage(self, reply: Answer) -> Usage:
        return reply.usage

    def render(self, reply: Answer, call: Call, usage: Usage) -> web.StreamResponse:
        reply.body["model"] = call.model.spec.name
        return web.Response(body=orjson.dumps(reply.body), content_type="application/json")


class MessagesStream(_MessagesJob):
    """A streamed message: the upstream's events passed through, or a chat stream
    translated into them. Each read's output leaves in one write."""

    __slots__ = ("_max_event_bytes", "_translator")
    content_type = "text/event-stream"
    reply_headers = NO_HEADERS
    whole = None

    def __init__(
        self, messages: MessagesRequest, providers: ProviderRegistry, max_event_bytes: int
    ) -> None:
        super().__init__(messages, providers)
        self._max_event_bytes = max_event_bytes
        self._translator: Translator[bytes] | None = None

    def open(self, route: Route) -> Translations[bytes]:
        messages = self._messages
        adapter, passed = self._adapter(route)
        if passed:
            relay = MessagesRelay(self._model, messages.prompt_estimate, self._max_event_bytes)
            self._translator = relay
            call = self._call
            return adapter.relay_stream(route.target, call.dialect, call.body, call.beta, relay)
        message_id = ID_PREFIX + secrets.token_hex(12)
        translator = ChatToMessages(
            self._model, message_id, messages.prompt_estimate, self._max_event_bytes
        )
        self._translator = translator
        return adapter.generate_stream(route.target, self._call, translator)

    def render(self, batch: Sequence[bytes]) -> bytes:
        return batch[0] if len(batch) == 1 else b"".join(batch)

    def end(self) -> bytes:
        return b""

    def failure(self, error: ParleyError) -> bytes:
        return anthropic_messages_reply.error_event(error)

    def delivered(self) -> Usage | None:
        translator = self._translator
        return translator.delivered() if translator is not None else None


class TokenCount(_MessagesJob):
    """``count_tokens``: the upstream's count on a Messages route, Parley's estimate on
    any other (without calling it). Admitted as a request of no tokens, recorded at no
    cost."""

    __slots__ = ()

    @property
    def operation(self) -> Operation:
        return COUNT_TOKENS

    def reservation(self, model: Resolved, caller: Caller) -> int:
        return 0

    def allowance(self, model: Resolved) -> Allowance:
        return NOTHING

    def call(self, route: Route) -> Awaitable[int]:
        providers, kind = self._providers, route.provider_type
        if self._adapter(route)[1] and providers.serves(capability.TOKEN_COUNT, kind):
            counter = providers.serving(capability.TOKEN_COUNT, kind)
            return counter.count_tokens(route.target, self._call)
        return _ready(self._messages.prompt_estimate)

    def usage(self, reply: int) -> Usage:
        return Usage()

    def render(self, reply: int, call: Call, usage: Usage) -> web.StreamResponse:
        return web.Response(
            body=orjson.dumps({"input_tokens": reply}), content_type="application/json"
        )


async def _ready(count: int) -> int:
    return count
