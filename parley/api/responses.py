"""POST /v1/responses: OpenAI's Responses API in front of every channel kind.

A Responses call goes through the runner like a chat call (the same admission, group
model access, rates, budget, routing and metering); only its jobs differ. The body is
read into the canonical call (``dialects/openai_responses.py``: a field or tool no
upstream behind it can take is a 400 naming it), written once as an OpenAI chat body,
and sent on each route through the channel's chat adapter: an OpenAI-compatible
upstream gets it as it is, an Anthropic one (and every later provider) translates it
again. The reply is written back as a ``response`` object, or streamed as Responses
events by ``ChatToResponses`` (``dialects/chat_to_responses.py``), fed the upstream's
chat bytes or, for another provider, the chat chunks its reader made.

With ``store`` (the default) the finished response, its input items and the earlier
turns' items are handed to the ``ResponseBook``, which writes them behind the reply;
``previous_response_id`` is the only thing here that reads the database, and only when
it is given. Errors are OpenAI's envelope; a started stream that fails ends with an
``error`` event and ``response.failed``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web

from parley.api.body import read_json
from parley.api.textgen import TextRequest, allowance, reservation
from parley.dialects import openai_chat, openai_chat_reply, openai_responses, responses_objects
from parley.dialects.canonical import Request, Unsupported, produced_characters
from parley.dialects.chat_to_responses import ChatToResponses
from parley.dialects.responses_relay import ResponsesRelay
from parley.dialects.responses_relay import read_usage as read_responses_usage
from parley.dialects.translator import estimate
from parley.domain.models import CHAT_KINDS, Resolved
from parley.domain.responses import StoredResponse
from parley.domain.tokens import count_images, estimate_messages, estimate_text, prompt_ceiling
from parley.domain.usage import Allowance, Usage
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, NotFound, ParleyError
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import CALLER, services
from parley.pipeline.job import NO_HEADERS, Operation
from parley.pipeline.response_book import ResponseBook
from parley.pipeline.route import Route, Router
from parley.providers.base import Responses, Translations
from parley.providers.registry import ProviderRegistry

RESPONSES = Operation("responses", "/v1/responses", CHAT_KINDS)
CHAT_PARAMS = {
    "response_format": "text.format",
    "reasoning_effort": "reasoning.effort",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
}
"""A chat body's fields an adapter may refuse, by the Responses field they came from."""


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


@value
class ResponsesRequest:
    """A Responses body read whole: the canonical call, its chat body (the model set
    per route) and what storing the response needs."""

    model: str
    body: dict[str, Any]
    stream: bool
    store: bool
    group_id: int
    items: list[JSON]
    """This request's input items, with ids."""
    history: list[JSON]
    """The earlier turns' items (``previous_response_id``), oldest first."""
    chat: JSON | None
    """``None`` when the call cannot be translated (``refusal`` says why)."""
    refusal: ParleyError | None
    """Why the call cannot go to a chat channel: raised for a translating route (before
    admission when the model has no native route). A channel that serves the Responses
    API natively takes the body as it is."""
    text: TextRequest
    """What reservations and allowances read (the prompt's estimate and ceiling)."""
    images: int


async def create_response(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    body_bytes = len(await request.read())  # the body read once, kept by aiohttp
    caller: Caller = request[CALLER]
    svc = services(request)
    parsed = await parse_responses(body, body_bytes, caller.group.id, svc.responses)
    book = svc.responses if parsed.store else None
    default_max = svc.settings.limits.default_max_tokens
    if parsed.stream:
        max_event = svc.settings.upstream.max_event_bytes
        job = ResponsesStream(
            parsed, svc.providers, svc.router, book, default_max, max_event_bytes=max_event
        )
        return await runner.stream(request, job)
    whole = ResponsesReply(parsed, svc.providers, svc.router, book, default_max)
    return await runner.reply(request, whole)


async def parse_responses(
    body: dict[str, Any], body_bytes: int, group_id: int, book: ResponseBook
) -> ResponsesRequest:
    """The body checked and read whole (400 naming what is wrong), the earlier turns
    fetched when ``previous_response_id`` names them (404 when the group has none)."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequest("'model' must be a non-empty string.", param="model")
    if "input" not in body:
        raise InvalidRequest("Missing required parameter: 'input'.", param="input")
    stream, store = body.get("stream", False), body.get("store", True)
    for name, flag in (("stream", stream), ("store", store)):
        if not isinstance(flag, bool):
            raise InvalidRequest(f"'{name}' must be a boolean.", param=name)
    if body.get("background"):
        raise InvalidRequest(
            "Background responses are not supported; call without 'background' (or stream).",
            param="background",
        )
    try:
        items = openai_responses.normalized_input(body["input"])
    except Unsupported as error:
        raise InvalidRequest(error.message, param=error.param) from None
    history = await earlier_turns(body.get("previous_response_id"), group_id, book)
    chat: JSON | None = None
    refusal: ParleyError | None = None
    images = max_tokens = 0
    try:
        items = await resolved(items, history, group_id, book)
        canonical = openai_responses.decode_request(body, history + items)
        chat = openai_chat.encode_request(canonical, model)
    except Unsupported as error:
        refusal = InvalidRequest(error.message, param=error.param)
    except NotFound as error:
        refusal = error
    if chat is not None:
        if stream:
            chat["stream_options"] = {"include_usage": True}
        estimate = estimate_messages(chat["messages"]) + _tools_estimate(canonical)
        images = count_images(chat["messages"])
        max_tokens = canonical.max_output_tokens or 0
    else:  # for a native channel only: a token per four characters of the body
        estimate = estimate_text(orjson.dumps(body).decode())
        limit = body.get("max_output_tokens")
        max_tokens = limit if isinstance(limit, int) and not isinstance(limit, bool) else 0
    earlier_bytes = len(orjson.dumps(history)) if history else 0
    text = TextRequest(
        model=model,
        body=body,
        stream=stream,
        include_usage=True,
        max_tokens=max_tokens if max_tokens > 0 else None,
        prompt_estimate=estimate,
        prompt_ceiling=max(estimate, prompt_ceiling(body_bytes + earlier_bytes, images)),
        choices=1,
    )
    return ResponsesRequest(
        model, body, stream, store, group_id, items, history, chat, refusal, text, images
    )


async def earlier_turns(previous: Any, group_id: int, book: ResponseBook) -> list[JSON]:
    """The items a ``previous_response_id`` continues from: its earlier turns, its input
    and its output; ``[]`` without one."""
    if previous is None:
        return []
    if not isinstance(previous, str) or not previous:
        raise InvalidRequest(
            "'previous_response_id' must be a string.", param="previous_response_id"
        )
    found = await book.find(previous, group_id)
    if found is None:
        raise NotFound(
            f"Previous response with id '{previous}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    response = orjson.loads(found.response)
    history: list[JSON] = orjson.loads(found.history)
    inputs: list[JSON] = orjson.loads(found.input_items)
    return [*history, *inputs, *(response.get("output") or ())]


async def resolved(
    items: list[JSON], history: list[JSON], group_id: int, book: ResponseBook
) -> list[JSON]:
    """``items`` with each ``item_reference`` replaced by the item it names: one of the
    earlier turns', or an output item of another stored response of the group (its id
    names the response, ``responses_objects.item_ids``); a 404 when there is none."""
    if not any(item["type"] == "item_reference" for item in items):
        return items
    known = {
        item.get("id"): item for item in [*history, *items] if item["type"] != "item_reference"
    }
    found: list[JSON] = []
    for index, item in enumerate(items):
        if item["type"] != "item_reference":
            found.append(item)
            continue
        wanted = item["id"]
        target = known.get(wanted)
        response_id = responses_objects.response_of_item(wanted)
        if target is None and response_id is not None:
            stored = await book.find(response_id, group_id)
            if stored is not None:
                output = orjson.loads(stored.response).get("output") or ()
                known.update((each.get("id"), each) for each in output)
                target = known.get(wanted)
        if target is None:
            raise NotFound(f"Item with id '{wanted}' not found.", param=f"input[{index}]")
        found.append(target)
    return found


def _tools_estimate(canonical: Request) -> int:
    if not canonical.tools:
        return 0
    written = [(tool.name, tool.description, tool.parameters) for tool in canonical.tools]
    return estimate_text(orjson.dumps(written).decode())


class _ResponsesJob:
    __slots__ = (
        "_book",
        "_created_at",
        "_default_max",
        "_id",
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
    ) -> None:
        self._parsed = parsed
        self._providers = providers
        self._router = router
        self._book = book
        self._default_max = default_max_tokens
        self._id = responses_objects.new_id("resp_")
        self._created_at = int(time.time())

    @property
    def operation(self) -> Operation:
        return RESPONSES

    @property
    def model(self) -> str:
        return self._parsed.model

    def accept(self, model: Resolved) -> None:
        refusal = self._parsed.refusal
        if refusal is not None and not any(
            route.responses_native for route in self._router.routes(model.spec.name)
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
        return allowance(self._parsed.text, model, self._default_max)

    def _skeleton(self) -> JSON:
        return responses_objects.skeleton(
            self._parsed.body, self._id, self._parsed.model, self._created_at
        )

    def _chat_body(self, route: Route) -> JSON:
        chat, refusal = self._parsed.chat, self._parsed.refusal
        if chat is None:
            assert refusal is not None
            raise refusal
        return {**chat, "model": route.target.model}

    def _native(self, route: Route) -> Responses | None:
        """The adapter relaying the call as it is, on a ``responses: native`` route."""
        return self._providers.responses(route.provider_type) if route.responses_native else None

    def _keep(self, response: JSON) -> None:
        """Hand the finished response to the book (when the caller asked to store it)."""
        book, parsed = self._book, self._parsed
        if book is None:
            return
        created = datetime.fromtimestamp(self._created_at, UTC)
        response_id = response.get("id")
        book.keep(
            StoredResponse(
                id=response_id if isinstance(response_id, str) and response_id else self._id,
                group_id=parsed.group_id,
                model=parsed.model,
                response=orjson.dumps(response).decode(),
                input_items=orjson.dumps(parsed.items).decode(),
                history=orjson.dumps(parsed.history).decode(),
                created_at=created,
                expires_at=book.expiry(created),
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
        native = self._native(route)
        if native is not None:
            found = await native.responses(route.target, self._parsed.body)
            found["model"] = self._parsed.model
            usage = read_responses_usage(found.get("usage")) or estimate(
                self._parsed.text.prompt_estimate, len(orjson.dumps(found.get("output"))), 1
            )
            return Answer(found, usage)
        chat = self._providers.chat(route.provider_type)
        try:
            found_chat = await chat.chat(route.target, self._chat_body(route))
        except InvalidRequest as error:
            raise in_responses_terms(error) from None
        reply = openai_chat_reply.decode_reply(found_chat)
        usage = reply.usage or estimate(
            self._parsed.text.prompt_estimate, produced_characters(reply.blocks), 1
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
        max_event_bytes: int,
    ) -> None:
        super().__init__(parsed, providers, router, book, default_max_tokens)
        self._max_event_bytes = max_event_bytes
        self._translator: ChatToResponses | ResponsesRelay | None = None

    def open(self, route: Route) -> Translations[bytes]:
        native = self._native(route)
        if native is not None:
            parsed = self._parsed
            relay = ResponsesRelay(parsed.model, parsed.text.prompt_estimate, self._max_event_bytes)
            self._translator = relay
            return native.responses_stream(route.target, parsed.body, relay)
        translator = ChatToResponses(
            self._skeleton(),
            self._parsed.text.prompt_estimate,
            self._max_event_bytes,
            responses_objects.item_ids(self._id),
        )
        self._translator = translator
        chat = self._providers.chat_translation(route.provider_type)
        try:
            return chat.chat_translated(route.target, self._chat_body(route), translator)
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
            translator = ChatToResponses(self._skeleton(), 0, self._max_event_bytes)
        return translator.failed(error.code or error.type, error.message)

    def delivered(self) -> Usage | None:
        translator = self._translator
        return translator.delivered() if translator is not None else None
