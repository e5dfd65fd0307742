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

Errors are in Anthropic's shape (the edge renders them so for these paths), and a
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
from parley.api.messages_request import MessagesRequest, parse_count, parse_messages
from parley.dialects import anthropic_messages_reply
from parley.dialects.call import ChatCall, passes_through
from parley.dialects.canonical import produced_characters
from parley.dialects.chat_to_messages import ChatToMessages
from parley.dialects.messages_relay import MessagesRelay
from parley.dialects.translator import Translator, estimate
from parley.domain.models import CHAT_KINDS, Resolved
from parley.domain.usage import NOTHING, UNBOUNDED, Allowance, Usage, with_estimate
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import CALLER, services
from parley.pipeline.job import NO_HEADERS, Operation
from parley.pipeline.route import Route
from parley.providers import base as capability
from parley.providers.base import Chat, Translations
from parley.providers.registry import ProviderRegistry

MESSAGES = Operation("messages", "/v1/messages", CHAT_KINDS)
COUNT_TOKENS = Operation("token counting", "/v1/messages/count_tokens", CHAT_KINDS)
ID_PREFIX = "msg_"


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


@value
class Answer:
    """A whole reply in Anthropic's shape, and what it consumed."""

    body: JSON
    usage: Usage


class _MessagesJob:
    __slots__ = ("_allowed", "_call", "_large", "_messages", "_model", "_providers")

    def __init__(
        self, messages: MessagesRequest, providers: ProviderRegistry, large: Large | None = None
    ) -> None:
        self._messages = messages
        self._providers = providers
        self._large = large
        self._model = ""
        self._call = messages.call()
        self._allowed = UNBOUNDED
        """The allowance the runner asked for at admission (``allowance``): a stream's
        ``message_delta`` says what is billed, capped there."""

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
        allowed = self._allowed = Allowance(prompt_tokens=prompt, completion_tokens=output)
        return allowed

    async def _written(self, route: Route) -> ChatCall:
        """The call for a translating route: for a large body, carrying its upstream's
        body written in a body process (``api/apart.py``), so this process never reads
        its messages."""
        large = self._large
        if large is None:
            return self._call
        codec = self._providers.codec(route.provider_type, route.target)
        return await large.written(self._call, codec, route.target)


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
        reply = await adapter.generate(route.target, await self._written(route))
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
        adapter, passed = self._adapter(route)
        if passed:
            relay = MessagesRelay(self._model, messages.prompt_estimate, self._max_event_bytes)
            self._translator = relay
            call = self._call
            return adapter.relay_stream(route.target, call.dialect, call.body, call.beta, relay)
        message_id = ID_PREFIX + secrets.token_hex(12)
        translator = ChatToMessages(
            self._model,
            message_id,
            messages.prompt_estimate,
            self._allowed,
            self._max_event_bytes,
        )
        self._translator = translator
        if self._large is None:
            return adapter.generate_stream(route.target, self._call, translator)
        return Later(  # a large body, written for the route in a body process
            lambda: self._written(route),
            lambda ready: adapter.generate_stream(route.target, ready, translator),
        )

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
