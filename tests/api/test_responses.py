"""POST /v1/responses and the stored responses, through the official ``openai`` SDK,
over an OpenAI-compatible fake engine and the Anthropic fake: create, stream, retrieve,
delete, input items, parse, function calling round trips, ``previous_response_id``
chains, ``store: false``, group isolation, metering and errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from tests.api.harness import Gateway, call, records
from tests.api.responses_harness import Upstreams, responses_gateway

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
}
BOTH = pytest.mark.parametrize("family", ["gpt", "claude"])


@pytest.fixture
async def upstreams(tmp_path: Path) -> AsyncIterator[Upstreams]:
    async for running in responses_gateway(tmp_path):
        yield running


@pytest.fixture
def gateway(upstreams: Upstreams) -> Gateway:
    return upstreams.gateway


@pytest.fixture
async def key(gateway: Gateway) -> str:
    return await gateway.key(await gateway.group("team"))


@pytest.fixture
def client(gateway: Gateway, key: str) -> openai.AsyncOpenAI:
    return gateway.client(key)


def model(family: str, variant: str = "like") -> str:
    return f"{family}-{variant}"


@BOTH
async def test_create_answers_a_response_object(client: openai.AsyncOpenAI, family: str) -> None:
    response = await client.responses.create(
        model=model(family), input="hello there friend", instructions="Be brief."
    )
    assert response.id.startswith("resp_") and response.object == "response"
    assert response.status == "completed" and response.model == model(family)
    assert response.output_text == "echo: hello there friend"
    assert response.output[0].type == "message" and response.output[0].id.startswith("msg_")
    assert response.usage is not None
    assert response.usage.input_tokens > 0 and response.usage.output_tokens == 4
    assert response.usage.input_tokens_details.cached_tokens == 0
    assert response.usage.output_tokens_details.reasoning_tokens == 0
    assert response.instructions == "Be brief."


async def test_the_reply_names_the_model_the_caller_named(
    client: openai.AsyncOpenAI, upstreams: Upstreams
) -> None:
    response = await client.responses.create(model="gpt-alias", input="hi")
    assert response.model == "gpt-alias"
    assert upstreams.engine.last_request.body["model"] == "upstream-chat"


@BOTH
async def test_a_stream_is_the_full_event_sequence(client: openai.AsyncOpenAI, family: str) -> None:
    async with client.responses.stream(model=model(family), input="stream me please") as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds.count("response.output_text.delta") == 4
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert final.output_text == "echo: stream me please"
    assert final.usage is not None and final.usage.output_tokens == 4


async def test_raw_stream_events_are_numbered_in_order(gateway: Gateway, key: str) -> None:
    client = gateway.client(key)
    stream = await client.responses.create(model="gpt-like", input="count me", stream=True)
    numbers = [event.sequence_number async for event in stream]
    assert numbers == list(range(len(numbers)))


@BOTH
async def test_stored_responses_are_retrieved_listed_and_deleted(
    client: openai.AsyncOpenAI, family: str
) -> None:
    first = await client.responses.create(
        model=model(family),
        input=[
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"role": "user", "content": "three"},
        ],
        metadata={"ticket": "42"},
    )
    found = await client.responses.retrieve(first.id)
    assert found.id == first.id and found.output_text == "echo: three"
    assert found.metadata == {"ticket": "42"}
    items = await client.responses.input_items.list(first.id)
    assert [item.content[0].text for item in items.data] == ["three", "two", "one"]  # type: ignore[union-attr]
    ascending = await client.responses.input_items.list(first.id, order="asc", limit=2)
    assert [item.content[0].text for item in ascending.data] == ["one", "two"]  # type: ignore[union-attr]
    assert ascending.has_more
    every = [item async for item in client.responses.input_items.list(first.id, limit=1)]
    assert len(every) == 3 and len({item.id for item in every}) == 3
    await client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.delete(first.id)


async def test_a_stored_response_is_written_to_the_database(
    client: openai.AsyncOpenAI, gateway: Gateway
) -> None:
    response = await client.responses.create(model="gpt-like", input="keep me")
    book = gateway.services.responses
    await book.close(5)  # everything waiting is written
    group_id = (await gateway.services.store.get_group("team")).id  # type: ignore[union-attr]
    stored = await gateway.services.store.find_response(response.id, group_id)
    assert stored is not None and json.loads(stored.response)["id"] == response.id
    assert await gateway.services.store.find_response(response.id, group_id + 1) is None


@BOTH
async def test_previous_response_id_continues_the_conversation(
    client: openai.AsyncOpenAI, upstreams: Upstreams, family: str
) -> None:
    first = await client.responses.create(model=model(family), input="my name is Ada")
    second = await client.responses.create(
        model=model(family), input="what is my name", previous_response_id=first.id
    )
    third = await client.responses.create(
        model=model(family), input="and again", previous_response_id=second.id
    )
    assert third.previous_response_id == second.id
    sent = (upstreams.engine if family == "gpt" else upstreams.anthropic).last_request.body
    texts = [_text(message["content"]) for message in sent["messages"]]
    assert texts == [
        "my name is Ada",
        "echo: my name is Ada",
        "what is my name",
        "echo: what is my name",
        "and again",
    ]
    items = await client.responses.input_items.list(third.id)
    assert len(items.data) == 1  # a response lists its own input, not the earlier turns'


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


@BOTH
async def test_a_function_call_round_trip(client: openai.AsyncOpenAI, family: str) -> None:
    asked = await client.responses.create(
        model=model(family, "tools"), input="weather in Paris", tools=[WEATHER]
    )
    (call_item,) = [item for item in asked.output if item.type == "function_call"]
    assert call_item.name == "get_weather"
    assert json.loads(call_item.arguments) == {"query": "echo: weather in Paris"}
    answered = await client.responses.create(
        model=model(family, "tools"),
        previous_response_id=asked.id,
        tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": call_item.call_id, "output": "sunny"}],
    )
    # the fakes echo the last user words: the engine the user's, Anthropic the tool result
    expected = "echo: weather in Paris" if family == "gpt" else "echo: sunny"
    assert answered.output_text == expected
    # the same round trip with the whole history sent back and nothing stored
    again = await client.responses.create(
        model=model(family, "tools"),
        store=False,
        tools=[WEATHER],
        input=[
            {"role": "user", "content": "weather in Paris"},
            *[item.model_dump(exclude_none=True) for item in asked.output],
            {"type": "function_call_output", "call_id": call_item.call_id, "output": "sunny"},
        ],
    )
    assert again.output_text == expected


@BOTH
async def test_a_streamed_function_call(client: openai.AsyncOpenAI, family: str) -> None:
    async with client.responses.stream(
        model=model(family, "tools"), input="weather in Oslo", tools=[WEATHER]
    ) as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    calls = [item for item in final.output if item.type == "function_call"]
    assert json.loads(calls[0].arguments) == {"query": "echo: weather in Oslo"}


class Person(BaseModel):
    name: str
    age: int


async def test_parse_with_a_pydantic_model(client: openai.AsyncOpenAI) -> None:
    parsed = await client.responses.parse(
        model="gpt-like", input='{"name": "Ada", "age": 36}', text_format=Person
    )
    assert parsed.output_parsed == Person(name="Ada", age=36)


async def test_reasoning_becomes_a_reasoning_item(client: openai.AsyncOpenAI) -> None:
    whole = await client.responses.create(
        model="gpt-reasoning", input="think", reasoning={"effort": "low"}
    )
    assert [item.type for item in whole.output] == ["reasoning", "message"]
    assert whole.output[0].content[0].text == "Let me think it over."  # type: ignore[union-attr]
    assert whole.usage is not None and whole.usage.output_tokens_details.reasoning_tokens == 5
    async with client.responses.stream(model="gpt-reasoning", input="think") as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert kinds.count("response.reasoning_text.delta") == 5
    assert [item.type for item in final.output] == ["reasoning", "message"]


async def test_store_false_keeps_nothing(client: openai.AsyncOpenAI, gateway: Gateway) -> None:
    response = await client.responses.create(model="gpt-like", input="forget me", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError) as refused:
        await client.responses.create(
            model="gpt-like", input="more", previous_response_id=response.id
        )
    assert refused.value.body["code"] == "previous_response_not_found"  # type: ignore[index]


async def test_another_group_never_sees_a_stored_response(
    client: openai.AsyncOpenAI, gateway: Gateway
) -> None:
    mine = await client.responses.create(model="gpt-like", input="private")
    other = gateway.client(await gateway.key(await gateway.group("others")))
    with pytest.raises(openai.NotFoundError) as refused:
        await other.responses.retrieve(mine.id)
    assert mine.id in refused.value.message
    with pytest.raises(openai.NotFoundError):
        await other.responses.input_items.list(mine.id)
    with pytest.raises(openai.NotFoundError):
        await other.responses.delete(mine.id)
    with pytest.raises(openai.NotFoundError):
        await other.responses.create(model="gpt-like", input="x", previous_response_id=mine.id)
    assert (await client.responses.retrieve(mine.id)).id == mine.id  # still there


@pytest.mark.parametrize(
    ("extra", "param", "named"),
    [
        ({"tools": [{"type": "web_search"}]}, "tools[0].type", "web_search"),
        ({"tools": [{"type": "file_search", "vector_store_ids": ["v"]}]}, "tools[0].type",
         "file_search"),
        ({"tools": [{"name": "f"}]}, "tools[0].type", "needs a 'type'"),
        ({"tools": ["f"]}, "tools[0].type", "needs a 'type'"),
        ({"tools": [{"type": {"a": 1}, "name": "f"}]}, "tools[0].type", "needs a 'type'"),
        ({"tools": [{"type": ["function"]}]}, "tools[0].type", "needs a 'type'"),
        ({"background": True}, "background", "ackground"),
        ({"input": 5}, "input", "input"),
        ({"store": "yes"}, "store", "store"),
        ({"previous_response_id": 7}, "previous_response_id", "previous_response_id"),
    ],
)  # fmt: skip
async def test_what_cannot_be_done_is_a_400_naming_it(
    gateway: Gateway, key: str, extra: dict[str, Any], param: str, named: str
) -> None:
    status, body = await call(
        gateway, "POST", "/v1/responses", key, json={"model": "gpt-like", "input": "x", **extra}
    )
    assert status == 400
    error = body["error"]
    assert error["param"] == param and named in error["message"]
    assert error["type"] == "invalid_request_error"


async def test_model_access_and_unknown_models_are_refused_as_for_chat(
    gateway: Gateway,
) -> None:
    limited = await gateway.key(await gateway.group("limited", models=["gpt-like"]))
    status, body = await call(
        gateway, "POST", "/v1/responses", limited, json={"model": "claude-like", "input": "x"}
    )
    assert status == 404 and body["error"]["code"] == "model_not_found"  # as for chat
    status, body = await call(
        gateway, "POST", "/v1/responses", limited, json={"model": "nope", "input": "x"}
    )
    assert status == 404 and body["error"]["code"] == "model_not_found"
    status, _ = await call(gateway, "POST", "/v1/responses", None, json={"model": "x"})
    assert status == 401


async def test_calls_are_metered_once_each(client: openai.AsyncOpenAI, gateway: Gateway) -> None:
    await client.responses.create(model="gpt-like", input="one two three")
    async with client.responses.stream(model="claude-like", input="four five") as stream:
        await stream.get_final_response()
    found = sorted(await records(gateway), key=lambda record: record.model)
    assert [(r.model, r.endpoint, r.status) for r in found] == [
        ("claude-like", "/v1/responses", 200),
        ("gpt-like", "/v1/responses", 200),
    ]
    gpt = found[1]
    assert (gpt.prompt_tokens, gpt.completion_tokens) == (3, 4) and not gpt.estimated
    assert gpt.cost_nanos == 3 * 1000 + 4 * 2000


async def test_a_stream_that_fails_after_it_began_ends_with_error_and_failed(
    client: openai.AsyncOpenAI, gateway: Gateway
) -> None:
    stream = await client.responses.create(
        model="gpt-broken", input="one two three four five six", stream=True
    )
    kinds = []
    last: Any = None
    async for event in stream:
        kinds.append(event.type)
        last = event
    assert kinds[0] == "response.created"
    assert kinds[-2:] == ["error", "response.failed"]
    assert last.response.status == "failed"
    (record,) = await records(gateway)
    assert record.status >= 500


async def test_item_references_name_stored_output_items_of_the_group(
    client: openai.AsyncOpenAI, gateway: Gateway, upstreams: Upstreams
) -> None:
    asked = await client.responses.create(
        model="gpt-tools", input="weather in Lima", tools=[WEATHER]
    )
    (call_item,) = [item for item in asked.output if item.type == "function_call"]
    answered = await client.responses.create(
        model="gpt-tools",
        tools=[WEATHER],
        input=[
            {"role": "user", "content": "weather in Lima"},
            {"type": "item_reference", "id": call_item.id},
            {"type": "function_call_output", "call_id": call_item.call_id, "output": "mild"},
        ],
    )
    assert answered.output_text == "echo: weather in Lima"
    sent = upstreams.engine.last_request.body["messages"]
    assert sent[1]["tool_calls"][0]["id"] == call_item.call_id
    other = gateway.client(await gateway.key(await gateway.group("others")))
    with pytest.raises(openai.NotFoundError) as refused:
        await other.responses.create(
            model="gpt-tools", input=[{"type": "item_reference", "id": call_item.id}]
        )
    assert call_item.id in refused.value.message


async def test_what_a_channel_refuses_names_the_responses_field(
    client: openai.AsyncOpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await client.responses.parse(model="claude-like", input="x", text_format=Person)
    assert refused.value.body["param"] == "text.format"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as streamed:
        async with client.responses.stream(
            model="claude-like", input="x", text_format=Person
        ) as stream:
            await stream.get_final_response()
    assert streamed.value.body["param"] == "text.format"  # type: ignore[index]


async def test_storing_never_holds_a_call_and_reads_only_when_asked(
    client: openai.AsyncOpenAI, gateway: Gateway
) -> None:
    store: Any = gateway.services.store
    held = asyncio.Event()
    writes: list[int] = []
    reads: list[str] = []
    save, find = store.save_responses, store.find_response

    async def slow_save(responses: Any) -> int:
        writes.append(len(responses))
        await held.wait()
        return int(await save(responses))

    async def counted_find(response_id: str, group_id: int) -> Any:
        reads.append(response_id)
        return await find(response_id, group_id)

    store.save_responses, store.find_response = slow_save, counted_find
    try:
        first = await asyncio.wait_for(client.responses.create(model="gpt-like", input="a"), 10)
        async with client.responses.stream(model="gpt-like", input="b") as stream:
            await asyncio.wait_for(stream.get_final_response(), 10)
        assert reads == []  # a call that continues nothing reads nothing
        # while its write is held, the response is found from memory
        assert (await client.responses.retrieve(first.id)).id == first.id
        assert reads == []
        assert writes  # the writer took it, off the call's path
    finally:
        held.set()
        store.save_responses, store.find_response = save, find


async def test_a_book_too_far_behind_refuses_calls_that_would_store(
    client: openai.AsyncOpenAI, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller given an id must be able to read it back: while the stored responses
    waiting to be written are past ``responses.queue_size``, a call that would store one
    more is refused before it is sent, and one with ``store: false`` is served."""
    book = type(gateway.services.responses)
    monkeypatch.setattr(book, "overloaded", property(lambda _: True))
    before = len(await records(gateway))
    with pytest.raises(openai.InternalServerError) as refused:
        await client.with_options(max_retries=0).responses.create(model="gpt-like", input="a")
    assert refused.value.status_code == 503
    assert "stored responses" in refused.value.message
    served = await client.responses.create(model="gpt-like", input="b", store=False)
    assert served.output_text == "echo: b"
    assert len(await records(gateway)) == before + 1  # the refused call was never sent
