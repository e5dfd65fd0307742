"""POST /v1/responses: OpenAI's Responses API in front of every channel kind.

A Responses call goes through the runner like a chat call (the same admission, group
model access, rates, budget, routing and metering); only its jobs differ. The body is
read by ``api/responses_request.py`` into the canonical call
(``dialects/openai_responses.py``: a field or tool no upstream behind it can take is a
400 naming it), written once as an OpenAI chat body, and handed to each route's ``Chat``
adapter as a ``ChatCall``: an OpenAI-compatible upstream gets the chat body, any other
writes the canonical call in its own dialect (one hop), and a channel that serves the
Responses API itself (``responses: native``) gets the body as sent
(``dialects.call.passes_through``). The reply is written back as a
``response`` object, or streamed as Responses events by ``ChatToResponses``
(``dialects/chat_to_responses.py``), fed the upstream's chat bytes or, for another
provider, the chat chunks its reader made.

With ``store`` (the default) the finished response, its input items and the turn it
continues are handed to the ``ResponseBook``, which writes them behind the reply (a
call that would store is refused 503 while the book is too far behind);
``previous_response_id`` and an ``item_reference`` to another stored response (read
with the body) are the only things that read the database, and only when given. Errors
are OpenAI's envelope; a started stream that fails ends with an ``error`` event and
``response.failed``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
from aiohttp import web

from parley.api.apart import Large, Later
from parley.api.body import read_raw
from parley.api.responses_apart import read_responses
from parley.api.responses_request import ResponsesRequest
from parley.api.textgen import allowance, reservation
from parley.dialects import responses_objects
from parley.dialects.call import OPENAI_RESPONSES, ChatCall, passes_through
from parley.dialects.canonical import produced_characters
from parley.dialects.chat_to_responses import ChatToResponses
from parley.dialects.outbound import Codec
from parley.dialects.responses_relay import ResponsesRelay
from parley.dialects.responses_relay import read_usage as read_responses_usage
from parley.dialects.translator import estimate
from parley.domain.models import CHAT_KINDS, Resolved
from parley.domain.responses import StoredResponse, is_response_id
from parley.domain.usage import UNBOUNDED, Allowance, Usage, with_estimate
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError, ServiceUnavailable
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import CALLER, services
from parley.pipeline.job import NO_HEADERS, Operation
from parley.pipeline.route import Route, Router
from parley.providers import base as capability
from parley.providers.base import Chat, Translations
from parley.providers.registry import ProviderRegistry
from parley.runtime.body_pool import BodyPool
from parley.runtime.response_book import ResponseBook

RESPONSES = Operation("responses", "/v1/responses", CHAT_KINDS)
CHAT_PARAMS = {
    "response_format": "text.format",
    "reasoning_effort": "reasoning.effort",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
}
"""A chat body's fields an adapter may refuse, by the Responses field they came from."""
BOOK_FULL = (
    "The gateway is catching up on stored responses; retry shortly, or call with 'store': false."
)


def in_responses_terms(error: InvalidRequest) -> InvalidRequest:
    """A channel adapter's refusal of the chat body, as the same refusal naming the
    caller's field instead (errors are fixed once made, so this is a new one)."""
    param = error.param or ""
    renamed = CHAT_PARAMS.get(param) or ("input" if param.startswith("messages") else param)
    if renamed == param or type(error) is not InvalidRequest:
        return error
    message = error.message
    for old in (param, param.partition("[")[0]):
        if message.startswith(old):
            message = renamed + message[len(old) :]
            break
    return InvalidRequest(message, param=renamed, code=error.code, headers=error.headers)


async def create_response(request: web.Request) -> web.StreamResponse:
    raw = await read_raw(request)
    caller: Caller = request[CALLER]
    svc = services(request)
    large = svc.settings.server.large_body_bytes
    parsed = await read_responses(raw, caller.group.id, svc.bodies, large, svc.responses)
    book = svc.responses if parsed.store else None
    if book is not None and book.overloaded:
        raise ServiceUnavailable(BOOK_FULL)
    default_max = svc.settings.limits.default_max_tokens
    if parsed.stream:
        max_event = svc.settings.upstream.max_event_bytes
        job = ResponsesStream(
            parsed,
            svc.providers,
            svc.router,
            book,
            default_max,
            bodies=svc.bodies,
            max_event_bytes=max_event,
        )
        return await runner.stream(request, job)
    whole = ResponsesReply(parsed, svc.providers, svc.router, book, default_max, bodies=svc.bodies)
    return await runner.reply(request, whole)


class _ResponsesJob:
    __slots__ = (
        "_allowed",
        "_bodies",
        "_book",
        "_call",
        "_created_at",
        "_default_max",
        "_id",
        "_large",
        "_parsed",
        "_providers",
        "_router",
    )

    def __init__(
        self,
        parsed: ResponsesRequest,
        providers: ProviderRegistry,
        router: Router,
        book: ResponseBook | None,
        default_max_tokens: int,
        *,
        bodies: BodyPool | None = None,
    ) -> None:
        self._parsed = parsed
        self._providers = providers
        self._router = router
        self._book = book
        self._default_max = default_max_tokens
        self._bodies = bodies
        self._large: Large | None = None
        self._id = responses_objects.new_id("resp_")
        self._created_at = int(time.time())
        self._call = parsed.call()
        self._allowed = UNBOUNDED
        """The allowance the runner asked for at admission (``allowance``): a stream's
        ``usage`` says what is billed, capped there."""

    @property
    def operation(self) -> Operation:
        return RESPONSES

    @property
    def model(self) -> str:
        return self._parsed.model

    def accept(self, model: Resolved) -> None:
        refusal = self._parsed.refusal
        if refusal is not None and not any(
            route.target.native_responses for route in self._router.routes(model.spec.name)
        ):
            raise refusal
        if not model.spec.vision and self._parsed.images:
            raise InvalidRequest(
                f"The model `{model.requested}` does not accept images; "
                "use a vision-capable model.",
                param="input",
                code="image_not_supported",
            )

    def reservation(self, model: Resolved, caller: Caller) -> int:
        return reservation(self._parsed.text, model, caller, self._default_max)

    def allowance(self, model: Resolved) -> Allowance:
        allowed = self._allowed = allowance(self._parsed.text, model, self._default_max)
        return allowed

    def _skeleton(self) -> JSON:
        return responses_objects.skeleton(
            self._parsed.body, self._id, self._parsed.model, self._created_at
        )

    def _adapter(self, route: Route) -> tuple[Chat, bool]:
        """The route's adapter, and whether it passes the call through (a channel that
        serves the Responses API itself); a call that cannot be translated is refused
        on any other route."""
        adapter = self._providers.serving(capability.CHAT, route.provider_type)
        if passes_through(self._call.dialect, adapter.speaks(route.target)):
            return adapter, True
        refusal = self._parsed.refusal
        if refusal is not None:
            raise refusal
        return adapter, False

    def _codec(self, route: Route) -> Codec | None:
        """The codec a large body's call is written in for ``route``, in a body process;
        ``None`` for a small body (its adapter writes it here) or an upstream that
        speaks OpenAI chat (it is sent the chat body made with the call)."""
        chat = self._parsed.chat
        if self._bodies is None or chat is None:
            return None
        if not isinstance(chat.get("messages"), orjson.Fragment):
            return None
        return self._providers.codec(route.provider_type, route.target)

    async def _written(self, route: Route, codec: Codec) -> ChatCall:
        """The call carrying its upstream's body, written from its chat body in a body
        process (the chat body's messages are bytes here, never read)."""
        large = self._large
        if large is None:
            chat = self._parsed.chat
            assert self._bodies is not None and chat is not None
            raw = orjson.dumps(chat)  # its messages' bytes, as they came from the process
            large = self._large = Large(raw, "chat", self._parsed.group_id, self._bodies)
        try:
            return await large.written(self._call, codec, route.target)
        except InvalidRequest as error:
            raise in_responses_terms(error) from None

    def _keep(self, response: JSON) -> None:
        """Hand the finished response to the book (when the caller asked to store it)."""
        book, parsed = self._book, self._parsed
        if book is None:
            return
        created = datetime.fromtimestamp(self._created_at, UTC)
        response_id = response.get("id")
        if not isinstance(response_id, str) or not is_response_id(response_id):
            # A native upstream's id the store cannot hold: a whole reply is rendered
            # after this and carries Parley's id instead.
            response_id = response["id"] = self._id
        book.keep(
            StoredResponse(
                id=response_id,
                group_id=parsed.group_id,
                model=parsed.model,
                response=orjson.dumps(response).decode(),
                input_items=orjson.dumps(parsed.items).decode(),
                history="[]" if parsed.continues else orjson.dumps(parsed.history).decode(),
                created_at=created,
                expires_at=book.expiry(created),
                previous_response_id=parsed.continues,
            )
        )


@value
class Answer:
    """A whole response object and what it consumed."""

    body: JSON
    usage: Usage


class ResponsesReply(_ResponsesJob):
    """A whole response, translated from the channel's chat completion."""

    __slots__ = ()

    async def call(self, route: Route) -> Answer:
        adapter, passed = self._adapter(route)
        if passed:
            found = await adapter.relay(route.target, OPENAI_RESPONSES, self._parsed.body, None)
            found["model"] = self._parsed.model
            usage = with_estimate(
                read_responses_usage(found.get("usage")),
                estimate(
                    self._parsed.text.prompt_estimate, len(orjson.dumps(found.get("output"))), 1
                ),
            )
            return Answer(found, usage)
        call = self._call
        codec = self._codec(route)
        if codec is not None:  # a large body, written for the route in a body process
            call = await self._written(route, codec)
        try:
            reply = await adapter.generate(route.target, call)
        except InvalidRequest as error:
            raise in_responses_terms(error) from None
        usage = with_estimate(
            reply.usage,
            estimate(self._parsed.text.prompt_estimate, produced_characters(reply.blocks), 1),
        )
        written = responses_objects.encode_response(
            reply, usage, self._skeleton(), responses_objects.item_ids(self._id)
        )
        return Answer(written, usage)

    def usage(self, reply: Answer) -> Usage:
        return reply.usage

    def render(self, reply: Answer, call: Call, usage: Usage) -> web.StreamResponse:
        self._keep(reply.body)
        return web.Response(body=orjson.dumps(reply.body), content_type="application/json")


class ResponsesStream(_ResponsesJob):
    """A streamed response: the channel's chat stream rendered as Responses events,
    each read's output in one write."""

    __slots__ = ("_max_event_bytes", "_translator")
    content_type = "text/event-stream"
    reply_headers = NO_HEADERS
    whole = None

    def __init__(
        self,
        parsed: ResponsesRequest,
        providers: ProviderRegistry,
        router: Router,
        book: ResponseBook | None,
        default_max_tokens: int,
        *,
        bodies: BodyPool | None = None,
        max_event_bytes: int,
    ) -> None:
        super().__init__(parsed, providers, router, book, default_max_tokens, bodies=bodies)
        self._max_event_bytes = max_event_bytes
        self._translator: ChatToResponses | ResponsesRelay | None = None

    def open(self, route: Route) -> Translations[bytes]:
        adapter, passed = self._adapter(route)
        if passed:
            parsed = self._parsed
            relay = ResponsesRelay(parsed.model, parsed.text.prompt_estimate, self._max_event_bytes)
            self._translator = relay
            body = parsed.body
            return adapter.relay_stream(route.target, OPENAI_RESPONSES, body, None, relay)
        translator = ChatToResponses(
            self._skeleton(),
            self._parsed.text.prompt_estimate,
            self._allowed,
            self._max_event_bytes,
            responses_objects.item_ids(self._id),
        )
        self._translator = translator
        codec = self._codec(route)
        if codec is not None:  # a large body, written for the route in a body process
            return Later(
                lambda: self._written(route, codec),
                lambda ready: adapter.generate_stream(route.target, ready, translator),
            )
        try:
            return adapter.generate_stream(route.target, self._call, translator)
        except InvalidRequest as error:
            raise in_responses_terms(error) from None

    def render(self, batch: Sequence[bytes]) -> bytes:
        return batch[0] if len(batch) == 1 else b"".join(batch)

    def end(self) -> bytes:
        translator = self._translator
        if translator is not None and translator.done and translator.response is not None:
            self._keep(translator.response)
        return b""

    def failure(self, error: ParleyError) -> bytes:
        translator = self._translator
        if translator is None:
            translator = ChatToResponses(self._skeleton(), 0, self._allowed, self._max_event_bytes)
        return translator.failed(error.code or error.type, error.message)

    def delivered(self) -> Usage | None:
        translator = self._translator
        return translator.delivered() if translator is not None else None
