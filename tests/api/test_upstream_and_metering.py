"""Upstream failures and metering: one usage record per admitted call, billed once."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import pytest

from tests.api.harness import Gateway, records
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

MESSAGES: Any = [{"role": "user", "content": "hello there friend"}]


async def test_a_call_is_metered_with_exact_cost(gateway: Gateway, key: str) -> None:
    await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    (record,) = await records(gateway)
    assert (record.model, record.channel, record.endpoint) == (
        "chat-large",
        "engine",
        "/v1/chat/completions",
    )
    assert (record.prompt_tokens, record.completion_tokens, record.status) == (3, 4, 200)
    # spec prices: $0.00001 / 1K input, $0.00003 / 1K output = 10 and 30 nano-dollars a token
    assert record.cost_nanos == 3 * 10 + 4 * 30
    assert record.request_id.startswith("req_")
    assert not record.estimated


async def test_reply_carries_its_request_id(gateway: Gateway, key: str) -> None:
    raw = await gateway.client(key).chat.completions.with_raw_response.create(
        model="chat-large", messages=MESSAGES
    )
    (record,) = await records(gateway)
    assert raw.headers["x-request-id"] == record.request_id


async def test_a_cookie_an_upstream_sets_is_never_sent_back(
    start_gateway: Any, engine: FakeEngine
) -> None:
    def by_host_name(config: dict[str, Any]) -> None:
        # A cookie jar keeps no cookie of a bare IP address; a host name shows the leak.
        channel = config["channels"][0]
        channel["base_url"] = channel["base_url"].replace("127.0.0.1", "localhost")

    gateway = await start_gateway(by_host_name)
    client = gateway.client(await gateway.key(await gateway.group("team")))
    for _ in range(2):
        await client.chat.completions.create(model="chat-large", messages=MESSAGES)
    first, second = engine.requests[-2:]
    assert "localhost" in first.headers["Host"]
    assert "Cookie" not in first.headers and "Cookie" not in second.headers


async def test_unreachable_upstream_is_502_naming_no_address(start_gateway: Any) -> None:
    def dead_channel(config: dict[str, Any]) -> None:
        config["channels"][0]["base_url"] = "http://127.0.0.1:9/v1"

    gateway = await start_gateway(dead_channel)
    key = await gateway.key(await gateway.group("team"))
    with pytest.raises(openai.APIStatusError) as failed:
        await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    assert failed.value.status_code == 502
    assert "127.0.0.1" not in failed.value.message and ":9" not in failed.value.message
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (502, 0)


async def test_upstream_timeout_is_504_and_not_billed(
    start_gateway: Any, engine: FakeEngine
) -> None:
    def short_read(config: dict[str, Any]) -> None:
        config["channels"][0]["timeouts"] = {"connect": 1, "read": 0.2}

    gateway = await start_gateway(short_read)
    key = await gateway.key(await gateway.group("team"))
    engine.behaviour = Behaviour(hang=2.0)
    with pytest.raises(openai.APIStatusError) as failed:
        await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    assert failed.value.status_code == 504
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (504, 0)


async def test_upstream_refusing_the_request_is_relayed_as_400(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(fail=400)
    with pytest.raises(openai.BadRequestError) as failed:
        await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    assert "Fake engine failure" in failed.value.message


async def test_failover_to_the_next_channel_bills_once(
    start_gateway: Any, engine: FakeEngine
) -> None:
    def two_channels(config: dict[str, Any]) -> None:
        good = config["channels"][0]
        dead = {**good, "name": "dead", "base_url": "http://127.0.0.1:9/v1", "priority": 10}
        config["channels"] = [dead, good]

    gateway = await start_gateway(two_channels)
    key = await gateway.key(await gateway.group("team"))
    reply = await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    assert reply.choices[0].message.content == "echo: hello there friend"
    (record,) = await records(gateway)
    assert (record.channel, record.status, record.cost_nanos) == ("engine", 200, 150)


async def test_sdk_retry_after_a_failed_call_is_billed_once(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(fail=500)
    client = gateway.client(key, max_retries=1)
    failing = asyncio.create_task(
        client.chat.completions.with_raw_response.create(model="chat-large", messages=MESSAGES)
    )
    async with asyncio.timeout(5):
        while not engine.requests:  # noqa: ASYNC110 (polling a fake engine's record)
            await asyncio.sleep(0.01)
    engine.behaviour = Behaviour()
    raw = await failing
    assert raw.retries_taken == 1
    billed = [r for r in await records(gateway) if r.cost_nanos]
    failed = [r for r in await records(gateway) if r.status == 502]
    assert len(billed) == 1 and len(failed) == 1


async def test_stream_cut_by_the_caller_stops_the_upstream_and_is_billed_once(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(delay=0.05, words=200)
    body = {"model": "chat-large", "messages": MESSAGES, "stream": True}
    received = 0
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.post(f"{gateway.v1}/chat/completions", json=body) as response,
    ):
        async for line in response.content:
            if line.startswith(b"data: "):
                received += 1
            if received == 5:
                break
    async with asyncio.timeout(5):
        await engine.wait_for_cancelled_streams(1)
    async with asyncio.timeout(5):
        while not (found := await records(gateway)):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    (record,) = found
    assert record.status == 499
    assert record.estimated
    assert 1 <= record.completion_tokens < 200
    assert record.cost_nanos > 0


async def test_stream_without_upstream_usage_is_estimated(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(usage=False, words=8)
    stream = await gateway.client(key).chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    [_ async for _ in stream]
    (record,) = await records(gateway)
    assert record.estimated and record.status == 200
    assert record.completion_tokens >= 8


async def test_mid_stream_upstream_error_reaches_the_caller_as_an_error_event(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(error_after=3)
    stream = await gateway.client(key).chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    with pytest.raises(openai.APIError):
        [_ async for _ in stream]
    (record,) = await records(gateway)
    assert record.status >= 500
