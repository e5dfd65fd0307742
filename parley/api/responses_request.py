"""A Responses body read for ``POST /v1/responses``: checked, continued and translated.

``parse_responses`` checks the body (a 400 naming what is wrong), fetches the earlier
turns a ``previous_response_id`` names and the items an ``item_reference`` names (404
when the group has none), reads the call into the canonical call and writes it once as
an OpenAI chat body, and estimates the prompt for reservations. What the call cannot
say to a chat channel is kept as the ``refusal``, not raised: a channel that serves the
Responses API natively takes the body as it is. It stands apart from the handler and its
jobs (``api/responses.py``) because it is everything that happens before the runner,
and the only part of the call that looks up stored responses (through the
``ResponseBook``, and only when the body names one).
"""

from __future__ import annotations

from operator import methodcaller
from typing import Any

import orjson

from parley.api.body import sampling
from parley.api.textgen import TextRequest
from parley.dialects import openai_chat, openai_responses, responses_objects
from parley.dialects.call import OPENAI_RESPONSES, ChatCall
from parley.dialects.canonical import Request, Unsupported
from parley.domain.responses import TURNS_PER_COPY
from parley.domain.tokens import estimate_text, prompt_ceiling
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, NotFound, ParleyError
from parley.runtime.response_book import ResponseBook

TYPE_OF = methodcaller("get", "type")


@value
class ResponsesRequest:
    """A Responses body read whole: the canonical call, its chat body (the model set
    per route) and what storing the response needs."""

    model: str
    body: dict[str, Any]
    stream: bool
    store: bool
    group_id: int
    items: list[JSON] | orjson.Fragment
    """This request's input items, with ids (serialized when a body process read them,
    ``api/responses_apart.py``)."""
    history: list[JSON]
    """The earlier turns' items (``previous_response_id``), oldest first."""
    continues: str | None
    """The stored response this call continues, which its own stored row names instead
    of copying ``history``; ``None`` when it continues none, or when its row keeps the
    copy (the turn ``TURNS_PER_COPY`` past the last one that did)."""
    chat: JSON | None
    """The call written as an OpenAI chat body once, for an upstream that speaks chat
    (its messages serialized when a body process read it); ``None`` when the call
    cannot be translated (``refusal`` says why)."""
    refusal: ParleyError | None
    """Why the call cannot go to a chat channel: raised for a translating route (before
    admission when the model has no native route). A channel that serves the Responses
    API natively takes the body as it is."""
    text: TextRequest
    """What reservations and allowances read (the prompt's estimate and ceiling)."""
    images: int
    request: Request | None = None
    """The canonical call, as read here; ``None`` when it cannot be translated, or when a
    body process read it (``call`` reads it again, only for a route that needs it)."""

    def call(self) -> ChatCall:
        """The canonical call: the body as sent (for a channel that serves the Responses
        API itself), its chat body, and its ``Request``. A body a body process read
        (``api/responses_apart.py``) is never parsed here: its ``Request``, if a route
        needs it, is read back from the chat body written there."""
        chat = self.chat

        def read_back(_: JSON) -> Request:
            if chat is None:
                raise RuntimeError("A call that cannot be translated has no canonical form.")
            return openai_chat.decode_request(_unsealed(chat))

        return ChatCall(
            OPENAI_RESPONSES, self.body, read_back, request=self.request, chat_body=chat
        )


def _unsealed(chat: JSON) -> JSON:
    """A chat body whose ``messages`` are objects (a body process left them serialized)."""
    messages = chat.get("messages")
    if isinstance(messages, orjson.Fragment):
        return {**chat, "messages": orjson.loads(orjson.dumps(messages))}  # its bytes, read
    return chat


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
    sampling(body)
    if body.get("background"):
        raise InvalidRequest(
            "Background responses are not supported; call without 'background' (or stream).",
            param="background",
        )
    try:
        items = openai_responses.normalized_input(body["input"], kept=store)
    except Unsupported as error:
        raise InvalidRequest(error.message, param=error.param) from None
    history, continues = await earlier_turns(body.get("previous_response_id"), group_id, book)
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
        estimate, images = openai_chat.read_messages(chat["messages"])
        estimate += _tools_estimate(canonical)
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
        model,
        body,
        stream,
        store,
        group_id,
        items,
        history,
        continues,
        chat,
        refusal,
        text,
        images,
        canonical if chat is not None else None,
    )


async def earlier_turns(
    previous: Any, group_id: int, book: ResponseBook
) -> tuple[list[JSON], str | None]:
    """The items a ``previous_response_id`` continues from (its earlier turns, its input
    and its output, oldest first; ``[]`` without one), and the id the new turn's row
    names (``ResponsesRequest.continues``)."""
    if previous is None:
        return [], None
    if not isinstance(previous, str) or not previous:
        raise InvalidRequest(
            "'previous_response_id' must be a string.", param="previous_response_id"
        )
    turns = await book.turns(previous, group_id)
    if not turns:
        raise NotFound(
            f"Previous response with id '{previous}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    items: list[JSON] = []
    for turn in reversed(turns):
        items += orjson.loads(turn.history)
        items += orjson.loads(turn.input_items)
        items += orjson.loads(turn.response).get("output") or ()
    return items, previous if len(turns) < TURNS_PER_COPY else None


async def resolved(
    items: list[JSON], history: list[JSON], group_id: int, book: ResponseBook
) -> list[JSON]:
    """``items`` with each ``item_reference`` replaced by the item it names: one of the
    earlier turns', or an output item of another stored response of the group (its id
    names the response, ``responses_objects.item_ids``); a 404 when there is none."""
    if "item_reference" not in map(TYPE_OF, items):  # a walk in C: a body may hold millions
        return items
    known = {
        item.get("id"): item for item in [*history, *items] if item.get("type") != "item_reference"
    }
    found: list[JSON] = []
    for index, item in enumerate(items):
        if item.get("type") != "item_reference":
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
