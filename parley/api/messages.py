"""POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API in front.

A Messages call goes through the runner like a chat call (the same admission, rates,
budget, routing and metering); only its jobs differ. On a route whose upstream speaks
Messages (``type: anthropic``, and Claude models on ``type: vertex``) the call is passed
through: the body as it came but for the model (Vertex's differences are its adapter's),
``anthropic-beta`` with it, and the reply (or each event's bytes) as the upstream sent
it, the model renamed. On any other route it is translated: the body read
into the canonical call (``dialects/anthropic_messages.py``, a field the upstream cannot
take is a 400 naming it), written as an OpenAI chat body, and the reply or stream
translated back (``dialects/chat_to_messages.py``).

Errors are in Anthropic's shape (the middleware renders them so for these paths), and a
started stream that fails ends with Anthropic's ``error`` event.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Sequence
from typing import Any

import orjson
from aiohttp import web

from parley.api.apart import Large, Later, read_messages
from parley.api.body import decode_json, read_raw
from parley.api.messages_request import MessagesRequest, as_chat, parse_count, parse_messages
from parley.dialects import (
    anthropic_messages_reply,
    openai_chat_reply,
)
from parley.dialects.canonical import produced_characters
from parley.dialects.chat_to_messages import ChatToMessages
from parley.dialects.messages_relay import MessagesRelay
from parley.dialects.translator import Translator, estimate
from parley.domain.models import CHAT_KINDS, Resolved
from parley.domain.usage import NOTHING, Allowance, Usage, with_estimate
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError, encode_anthropic_error_event
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import CALLER, services
from parley.pipeline.job import NO_HEADERS, Operation
from parley.pipeline.route import Route
from parley.providers.base import Translations
from parley.providers.registry import ProviderRegistry

MESSAGES = Operation("messages", "/v1/messages", CHAT_KINDS)
COUNT_TOKENS = Operation("token counting", "/v1/messages/count_tokens", CHAT_KINDS)
ID_PREFIX = "msg_"
TIERED_CHANNEL = "openai"


async def create_message(request: web.Request) -> web.StreamResponse:
    raw = await read_raw(request)
    beta = request.headers.get("anthropic-beta")
    svc = services(request)
    large = None
    if len(raw) > svc.settings.server.large_body_bytes:  # read, and translated, apart
        messages, large = await read_messages(raw, request[CALLER].group.id, svc.bodies, beta)
    else:
        messages = parse_messages(decode_json(raw), beta, len(raw))
    if messages.stream:
        max_event = svc.settings.upstream.max_event_bytes
        stream = MessagesStream(messages, svc.providers, max_event, large)
        return await runner.stream(request, stream)
    return await runner.reply(request, MessagesReply(messages, svc.providers, large))


async def count_tokens(request: web.Request) -> web.StreamResponse:
    raw = await read_raw(request)
    beta = request.headers.get("anthropic-beta")
    svc = services(request)
    if len(raw) > svc.settings.server.large_body_bytes:  # read in a body process
        group = request[CALLER].group.id
        counting, _ = await read_messages(raw, group, svc.bodies, beta, counting=True)
    else:
        counting = parse_count(decode_json(raw), beta)
    return await runner.reply(request, TokenCount(counting, svc.providers))


def chat_body(messages: MessagesRequest, route: Route, providers: ProviderRegistry) -> JSON:
    """The OpenAI chat body for a translating route (``as_chat``): signed thinking kept
    for an adapter that reads it back (``ProviderRegistry.reads_chat``), and the service
    tier asked for when the channel is OpenAI's own (the only one with tiers)."""
    signed = providers.reads_chat(route.provider_type)
    tiered = route.provider_type == TIERED_CHANNEL
    return as_chat(messages.body, route.target.model, signed=signed, tiered=tiered)


@value
class Answer:
    """A whole reply in Anthropic's shape, and what it consumed."""

    body: JSON
    usage: Usage


class _MessagesJob:
    __slots__ = ("_large", "_messages", "_model", "_providers")

    def __init__(
        self, messages: MessagesRequest, providers: ProviderRegistry, large: Large | None = None
    ) -> None:
        self._messages = messages
        self._providers = providers
        self._large = large
        self._model = ""

    @property
    def operation(self) -> Operation:
        return MESSAGES

    @property
    def model(self) -> str:
        return self._messages.model

    def accept(self, model: Resolved) -> None:
        if not model.spec.vision and self._messages.images:
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

    async def _chat_body(self, route: Route) -> JSON:
        """``chat_body``, or for a large body the same made in a body process (and, for
        a channel of a third dialect, written in its dialect there too)."""
        large, providers = self._large, self._providers
        if large is None:
            return chat_body(self._messages, route, providers)
        return await large.translated(
            {},
            providers.codec(route.provider_type, route.target),
            route.target.model,
            signed=providers.reads_chat(route.provider_type),
            tiered=route.provider_type == TIERED_CHANNEL,
        )


class MessagesReply(_MessagesJob):
    """A whole message: passed through, or translated from a chat completion."""

    __slots__ = ()

    async def call(self, route: Route) -> Answer:
        messages = self._messages
        adapter = self._providers.messages(route.provider_type, route.target)
        if adapter is not None:
            body = await adapter.messages(route.target, messages.body, messages.beta)
            found = anthropic_messages_reply.read_usage(body.get("usage"))
            return Answer(body, with_estimate(found, self._estimated(body.get("content"))))
        chat = self._providers.chat(route.provider_type)
        reply = openai_chat_reply.decode_reply(
            await chat.chat(route.target, await self._chat_body(route))
        )
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
        self,
        messages: MessagesRequest,
        providers: ProviderRegistry,
        max_event_bytes: int,
        large: Large | None = None,
    ) -> None:
        super().__init__(messages, providers, large)
        self._max_event_bytes = max_event_bytes
        self._translator: Translator[bytes] | None = None

    def open(self, route: Route) -> Translations[bytes]:
        messages = self._messages
        adapter = self._providers.messages(route.provider_type, route.target)
        if adapter is not None:
            relay = MessagesRelay(self._model, messages.prompt_estimate, self._max_event_bytes)
            self._translator = relay
            return adapter.messages_stream(route.target, messages.body, messages.beta, relay)
        body = None if self._large is not None else chat_body(messages, route, self._providers)
        message_id = ID_PREFIX + secrets.token_hex(12)
        translator = ChatToMessages(
            self._model, message_id, messages.prompt_estimate, self._max_event_bytes
        )
        self._translator = translator
        chat = self._providers.chat_translation(route.provider_type)
        if body is not None:
            return chat.chat_translated(route.target, body, translator)
        return Later(  # a large body, made in a body process
            lambda: self._chat_body(route),
            lambda made: chat.chat_translated(route.target, made, translator),
        )

    def render(self, batch: Sequence[bytes]) -> bytes:
        return batch[0] if len(batch) == 1 else b"".join(batch)

    def end(self) -> bytes:
        return b""

    def failure(self, error: ParleyError) -> bytes:
        return encode_anthropic_error_event(error)

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
        messages = self._messages
        adapter = self._providers.messages(route.provider_type, route.target)
        if adapter is not None:
            return adapter.count_tokens(route.target, messages.body, messages.beta)
        return _ready(messages.prompt_estimate)

    def usage(self, reply: int) -> Usage:
        return Usage()

    def render(self, reply: int, call: Call, usage: Usage) -> web.StreamResponse:
        return web.Response(
            body=orjson.dumps({"input_tokens": reply}), content_type="application/json"
        )


async def _ready(count: int) -> int:
    return count
