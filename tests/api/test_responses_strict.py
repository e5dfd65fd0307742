"""Every Responses object and event Parley writes, checked against the ``openai`` SDK's
own types in pydantic's strict mode (the SDK itself builds them leniently, so a field it
requires could be missing unseen): whole responses, every event of a stream, a stream
that fails, and a stored response read back; over an OpenAI-compatible and an Anthropic
channel, with text, reasoning, function calls and an output cut by its limit. Also the
sampling parameters, checked as chat checks them, and reasoning told as a summary."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.api.harness import Gateway
from tests.api.responses_harness import Upstreams, responses_gateway

EVENTS: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
}
CALLS = [
    ("gpt-like", {}),
    ("gpt-reasoning", {"reasoning": {"effort": "low"}}),
    ("gpt-tools", {"tools": [WEATHER]}),
    ("gpt-like", {"max_output_tokens": 1}),
    ("claude-like", {}),
    ("claude-thinking", {}),
    ("claude-tools", {"tools": [WEATHER]}),
]
NAMES = [f"{model}{'-' + next(iter(extra)) if extra else ''}" for model, extra in CALLS]


@pytest.fixture
async def upstreams(tmp_path: Path) -> AsyncIterator[Upstreams]:
    async for running in responses_gateway(tmp_path):
        yield running


@pytest.fixture
async def client(upstreams: Upstreams) -> openai.AsyncOpenAI:
    gateway: Gateway = upstreams.gateway
    return gateway.client(await gateway.key(await gateway.group("team")))


def strict(data: Any) -> Response:
    return Response.model_validate(data, strict=True)


@pytest.mark.parametrize(("model", "extra"), CALLS, ids=NAMES)
async def test_a_whole_response_is_strictly_the_sdks_type(
    client: openai.AsyncOpenAI, model: str, extra: dict[str, Any]
) -> None:
    raw = await client.responses.with_raw_response.create(
        model=model, input="weather in Paris", **extra
    )
    response = strict(raw.http_response.json())
    assert response.usage is not None
    assert response.usage.input_tokens_details.cache_write_tokens == 0
    stored = await client.responses.with_raw_response.retrieve(response.id)
    assert strict(stored.http_response.json()).id == response.id


async def streamed(client: openai.AsyncOpenAI, model: str, **extra: Any) -> list[Any]:
    """Every event of a stream, each validated strictly as the SDK's event union."""
    found: list[Any] = []
    async with client.responses.with_streaming_response.create(
        model=model, input="weather in Paris", stream=True, **extra
    ) as raw:
        async for line in raw.iter_lines():
            if line.startswith("data: "):
                found.append(EVENTS.validate_json(line[len("data: ") :], strict=True))
    return found


@pytest.mark.parametrize(("model", "extra"), CALLS, ids=NAMES)
async def test_every_stream_event_is_strictly_the_sdks_type(
    client: openai.AsyncOpenAI, model: str, extra: dict[str, Any]
) -> None:
    events = await streamed(client, model, **extra)
    assert events[-1].type in ("response.completed", "response.incomplete")
    final = events[-1].response
    assert final.usage is not None and final.usage.input_tokens_details.cache_write_tokens == 0


async def test_a_failed_stream_is_strictly_the_sdks_type(client: openai.AsyncOpenAI) -> None:
    events = await streamed(client, "gpt-broken")
    assert [event.type for event in events[-2:]] == ["error", "response.failed"]


@pytest.mark.parametrize(("name", "value"), [("temperature", 7), ("temperature", -1), ("top_p", 3)])
async def test_sampling_parameters_are_checked_as_chat_checks_them(
    client: openai.AsyncOpenAI, upstreams: Upstreams, name: str, value: float
) -> None:
    sent = len(upstreams.engine.requests)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.responses.create(model="gpt-like", input="x", **{name: value})
    with pytest.raises(openai.BadRequestError) as chat:
        await client.chat.completions.create(
            model="gpt-like", messages=[{"role": "user", "content": "x"}], **{name: value}
        )
    assert refused.value.param == chat.value.param == name
    assert refused.value.message == chat.value.message
    assert len(upstreams.engine.requests) == sent  # nothing went upstream


@pytest.mark.parametrize("model", ["gpt-reasoning", "claude-thinking"])
async def test_reasoning_is_told_as_its_summary_too(client: openai.AsyncOpenAI, model: str) -> None:
    """Clients that read only summaries (the Vercel AI SDK's ``reasoningText``) see the
    reasoning; the text stays as ``reasoning_text`` content as well."""
    whole = await client.responses.create(model=model, input="think")
    reasoning = whole.output[0]
    assert reasoning.type == "reasoning"
    assert [part.type for part in reasoning.summary] == ["summary_text"]
    assert reasoning.content is not None
    assert reasoning.summary[0].text == reasoning.content[0].text != ""
    events = await streamed(client, model)
    kinds = [event.type for event in events]
    first = kinds.index("response.output_item.added")
    assert kinds[first : first + 3] == [
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.content_part.added",
    ]
    deltas = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    done = kinds.index("response.reasoning_summary_text.done")
    assert kinds[done : done + 5] == [
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert events[done].text == deltas == reasoning.summary[0].text
    item = events[done + 4].item
    assert item.summary[0].text == item.content[0].text == deltas
