"""What an upstream reports is validated, and what a call is billed is capped.

A negative or fractional count is not a count: the report is ignored and logged, and
Parley's estimate is billed, so an upstream cannot credit a group. A report past what
the call allowed (``max_tokens``, else the model's context window, per reply, and the
prompt's ceiling, its body's bytes) is not believed either: the estimate is billed.
Whatever is billed is capped by that allowance.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from parley.domain.tokens import TEMPLATE_TOKENS
from tests.api.harness import Gateway, call, records
from tests.upstreams.openai_compatible import (
    INFLATED_USAGE,
    NEGATIVE_USAGE,
    Behaviour,
    FakeEngine,
)

MESSAGES = [{"role": "user", "content": "hello there"}]


def chat_body(**fields: Any) -> bytes:
    return orjson.dumps({"model": "chat-large", "messages": MESSAGES, **fields})


async def chat(gateway: Gateway, key: str, **fields: Any) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    body = chat_body(**fields)
    return await call(gateway, "POST", "/v1/chat/completions", key, data=body, headers=headers)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_negative_usage_is_ignored_and_cannot_credit_a_budget(
    gateway: Gateway, engine: FakeEngine, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    engine.behaviour = Behaviour(reported=NEGATIVE_USAGE)
    key = await gateway.key(await gateway.group("team", budget_nanos=100))
    with caplog.at_level(logging.WARNING, logger="parley.usage"):
        status, _ = await chat(gateway, key, stream=stream)
    assert status == 200
    (record,) = await records(gateway)
    assert record.estimated
    assert record.prompt_tokens > 0 and record.completion_tokens > 0
    assert record.cost_nanos >= 100  # Parley's estimate: the budget is spent, not credited
    assert "ignored the usage" in caplog.text and "-1000000" in caplog.text
    status, body = await chat(gateway, key, stream=stream)
    assert (status, body["error"]["code"]) == (429, "insufficient_quota")


async def test_fractional_usage_is_ignored(gateway: Gateway, engine: FakeEngine) -> None:
    engine.behaviour = Behaviour(reported={"prompt_tokens": 2.5, "completion_tokens": True})
    key = await gateway.key(await gateway.group("team"))
    status, body = await chat(gateway, key)
    assert status == 200
    (record,) = await records(gateway)
    assert record.estimated
    assert (
        body["usage"]["completion_tokens"] == record.completion_tokens == 5
    )  # "echo: hello there"


async def test_an_estimate_of_a_huge_reply_is_capped_by_max_tokens(
    gateway: Gateway, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(huge_reply=2_000_000, reported={})  # 2 MB, no usage
    key = await gateway.key(await gateway.group("team"))
    status, body = await chat(gateway, key, max_tokens=10)
    assert status == 200
    (record,) = await records(gateway)
    assert (record.completion_tokens, record.estimated) == (10, True)
    assert body["usage"]["completion_tokens"] == 10  # the reply says what is billed
    assert record.cost_nanos == record.prompt_tokens * 10 + 10 * 30


async def test_an_estimate_of_a_stream_is_capped_by_max_tokens(
    gateway: Gateway, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(words=400, overlong=True, usage=False)
    key = await gateway.key(await gateway.group("team"))
    status, _ = await chat(gateway, key, max_tokens=10, stream=True)
    assert status == 200
    (record,) = await records(gateway)
    assert (record.completion_tokens, record.estimated) == (10, True)


async def test_an_estimate_never_exceeds_what_was_delivered(
    gateway: Gateway, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(reported={})
    key = await gateway.key(await gateway.group("team"))
    status, body = await chat(gateway, key, max_tokens=1000)
    assert status == 200
    (record,) = await records(gateway)
    produced = body["choices"][0]["message"]["content"]
    assert record.completion_tokens == (len(produced) + 3) // 4


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_reported_usage_above_what_the_call_allowed_bills_the_estimate(
    gateway: Gateway, engine: FakeEngine, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    engine.behaviour = Behaviour(reported=INFLATED_USAGE)
    key = await gateway.key(await gateway.group("team"))
    with caplog.at_level(logging.WARNING, logger="parley.meter"):
        status, _ = await chat(gateway, key, max_tokens=10, stream=stream)
    assert status == 200
    (record,) = await records(gateway)
    assert record.estimated
    assert record.completion_tokens == 5  # "echo: hello there", a token per 4 characters
    # below the prompt's ceiling: its request body's bytes, and what an upstream may add
    ceiling = len(chat_body(max_tokens=10, stream=stream)) + TEMPLATE_TOKENS
    assert 0 < record.prompt_tokens < ceiling
    assert "capped the usage" in caplog.text


async def test_without_max_tokens_a_report_past_the_context_window_is_not_believed(
    gateway: Gateway, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(reported=INFLATED_USAGE)
    key = await gateway.key(await gateway.group("team"))
    status, body = await chat(gateway, key)
    assert status == 200
    (record,) = await records(gateway)
    assert (record.completion_tokens, record.estimated) == (5, True)
    assert body["usage"]["completion_tokens"] == 5  # the reply says what is billed


def sse_events(text: str) -> list[Any]:
    """The JSON of every ``data:`` line of an SSE body (``[DONE]`` left out)."""
    return [
        orjson.loads(line[6:])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


@pytest.mark.parametrize(
    ("behaviour", "billed"),
    [
        (Behaviour(words=400, overlong=True, usage=False), 10),  # Parley's own chunk
        (Behaviour(reported=INFLATED_USAGE), 5),  # the upstream's, not believed
    ],
    ids=["estimated", "inflated"],
)
async def test_a_streams_usage_chunk_says_what_it_bills(
    gateway: Gateway, engine: FakeEngine, behaviour: Behaviour, billed: int
) -> None:
    engine.behaviour = behaviour
    key = await gateway.key(await gateway.group("team"))
    status, text = await chat(
        gateway, key, max_tokens=10, stream=True, stream_options={"include_usage": True}
    )
    assert status == 200
    (record,) = await records(gateway)
    assert record.estimated
    (usage,) = [event["usage"] for event in sse_events(text) if event.get("usage")]
    assert usage["completion_tokens"] == record.completion_tokens == billed
    assert usage["prompt_tokens"] == record.prompt_tokens
    assert usage["total_tokens"] == record.prompt_tokens + billed


@pytest.mark.parametrize("dialect", ["messages", "responses"])
async def test_a_translated_streams_usage_says_the_capped_estimate_it_bills(
    gateway: Gateway, engine: FakeEngine, dialect: str
) -> None:
    engine.behaviour = Behaviour(words=400, overlong=True, usage=False)
    key = await gateway.key(await gateway.group("team"))
    if dialect == "messages":
        path = "/v1/messages"
        body = {"model": "chat-large", "max_tokens": 10, "messages": MESSAGES, "stream": True}
    else:
        path = "/v1/responses"
        body = {"model": "chat-large", "max_output_tokens": 10, "input": "hi", "stream": True}
    status, text = await call(gateway, "POST", path, key, json=body)
    assert status == 200
    (record,) = await records(gateway)
    assert (record.completion_tokens, record.estimated) == (10, True)
    events = sse_events(text)
    if dialect == "messages":
        (delta,) = [event for event in events if event["type"] == "message_delta"]
        assert delta["usage"]["output_tokens"] == 10
    else:
        (done,) = [event for event in events if event["type"] == "response.completed"]
        assert done["response"]["usage"]["output_tokens"] == 10
        assert done["response"]["usage"]["input_tokens"] == record.prompt_tokens
