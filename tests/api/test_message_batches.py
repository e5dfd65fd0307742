"""Anthropic's Message Batches through the official ``anthropic`` SDK, on SQLite and
PostgreSQL: each request runs as a Messages call of its own (passed through to an
Anthropic channel, translated for any other) at the model's batch price; requests are
checked before the batch is made; cancel, expiry, errors and deletion end in Anthropic's
result shapes; a batch is its group's alone, and apart from OpenAI's batches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from sqlalchemy import update

from parley.store.schema import batches
from tests.api.harness import (
    CHANNEL_KEY,
    Gateway,
    StartGateway,
    default_config,
    records,
    starting,
)
from tests.upstreams.anthropic import FakeAnthropic
from tests.upstreams.openai_compatible import Behaviour, FakeEngine


@pytest.fixture
async def claude() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def start(
    engine: FakeEngine, claude: FakeAnthropic, database_url: str, tmp_path: Path
) -> AsyncIterator[StartGateway]:
    def config() -> dict[str, Any]:
        settings = default_config(engine.base_url, tmp_path)
        settings["database"] = {"url": database_url}
        settings["models"][0]["prices"]["batch_discount"] = "0.5"
        settings["batches"] = {"poll_seconds": 0.05, "concurrency": 4, "per_channel": 2}
        settings["channels"][0]["timeouts"] = {"connect": 2, "read": 60}
        settings["channels"][0]["models"] += [
            {"name": "chat-broken", "upstream": "upstream-chat+fail-500"}
        ]
        settings["channels"].append(
            {
                "name": "claude",
                "type": "anthropic",
                "base_url": claude.base_url,
                "api_key": CHANNEL_KEY,
                "models": [{"name": "claude-large", "upstream": "claude-up"}],
                "timeouts": {"connect": 2, "read": 60},
            }
        )
        settings["models"] += [
            {"name": "chat-broken", "kind": "chat"},
            {
                "name": "claude-large",
                "prices": {
                    "input_per_1k": "0.003",
                    "output_per_1k": "0.015",
                    "batch_input_per_1k": "0.001",
                    "batch_output_per_1k": "0.005",
                },
            },
        ]
        return settings

    async with starting(config) as start:
        yield start


@pytest.fixture
async def gateway(start: StartGateway) -> Gateway:
    return await start()


def request(custom_id: str, text: str, model: str = "chat-large", **params: Any) -> Any:
    return {
        "custom_id": custom_id,
        "params": {
            "model": model,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": text}],
            **params,
        },
    }


async def ended(client: anthropic.AsyncAnthropic, batch_id: str) -> Any:
    """The batch once its processing ended (polled as a client would)."""
    for _ in range(2000):
        batch = await client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        await asyncio.sleep(0.02)
    raise AssertionError(f"batch {batch_id} is still {batch.processing_status}")


async def results(client: anthropic.AsyncAnthropic, batch_id: str) -> dict[str, Any]:
    return {
        line.custom_id: line.result
        async for line in await client.messages.batches.results(batch_id)
    }


async def seen(engine: FakeEngine, count: int) -> None:
    for _ in range(2000):
        if len(engine.requests) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the engine received {len(engine.requests)} requests, not {count}")


async def test_a_message_batch_runs_every_request_once_at_the_batch_price(
    gateway: Gateway, engine: FakeEngine, claude: FakeAnthropic
) -> None:
    key = await gateway.key(await gateway.group("team"))
    client = gateway.claude(key)
    made = await client.messages.batches.create(
        requests=[
            request("translated-1", "hello one"),
            request("translated-2", "hello two"),
            request("passed-1", "hello claude", model="claude-large"),
        ]
    )
    assert made.id.startswith("msgbatch_") and made.type == "message_batch"
    assert made.processing_status == "in_progress" and made.results_url is None
    assert made.request_counts.processing + made.request_counts.succeeded == 3
    assert made.expires_at - made.created_at == timedelta(hours=24)

    done = await ended(client, made.id)
    assert done.ended_at is not None and done.cancel_initiated_at is None
    counts = done.request_counts
    assert (counts.processing, counts.succeeded, counts.errored) == (0, 3, 0)
    assert done.results_url == f"{gateway.base_url}/v1/messages/batches/{made.id}/results"
    found = await results(client, made.id)
    assert sorted(found) == ["passed-1", "translated-1", "translated-2"]
    assert {result.type for result in found.values()} == {"succeeded"}
    assert found["translated-2"].message.content[0].text == "echo: hello two"
    assert found["translated-2"].message.model == "chat-large"
    assert found["passed-1"].message.content[0].text == "echo: hello claude"
    assert found["passed-1"].message.type == "message"
    sent = sorted(r.body["messages"][0]["content"] for r in engine.requests)
    assert sent == ["hello one", "hello two"]  # each once, translated to chat
    assert [r.body["messages"][0]["content"] for r in claude.requests] == ["hello claude"]

    logged = {r.request_id: r for r in await records(gateway)}
    assert len(logged) == 3 and all(r.request_id.startswith("batch_req_") for r in logged.values())
    (passed,) = [r for r in logged.values() if r.model == "claude-large"]
    batch_price = (passed.prompt_tokens * 1_000_000 + passed.completion_tokens * 5_000_000) // 1000
    assert passed.cost_nanos == batch_price > 0  # the explicit batch prices

    assert [b.id async for b in client.messages.batches.list()] == [made.id]
    openai_client = gateway.client(key)
    assert [b async for b in openai_client.batches.list()] == []  # apart from OpenAI's
    with pytest.raises(openai.NotFoundError):
        await openai_client.batches.retrieve(made.id)

    deleted = await client.messages.batches.delete(made.id)
    assert (deleted.id, deleted.type) == (made.id, "message_batch_deleted")
    with pytest.raises(anthropic.NotFoundError) as missing:
        await client.messages.batches.retrieve(made.id)
    assert missing.value.body["type"] == "error"  # type: ignore[index]
    assert [b async for b in client.messages.batches.list()] == []


async def test_requests_are_checked_before_a_batch_is_made(
    gateway: Gateway, engine: FakeEngine
) -> None:
    group = await gateway.group("narrow", models=["chat-large"])
    client = gateway.claude(await gateway.key(group))
    problems = {
        "requests.1.custom_id": [request("a", "one"), request("a", "again")],
        "requests.0.custom_id": [request("not ok!", "x")],
        "requests.0.params.max_tokens": [request("a", "x", max_tokens=0)],
        "requests.1.params": [request("a", "x"), request("b", "x", stream=True)],
        "requests.0.params.model": [request("a", "x", model="claude-large")],  # not the group's
    }
    for where, requests in problems.items():
        with pytest.raises(anthropic.BadRequestError) as refused:
            await client.messages.batches.create(requests=requests)
        body: Any = refused.value.body
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        assert body["error"]["message"].startswith(where), body
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.batches.create(requests=[])
    assert [b async for b in client.messages.batches.list()] == []
    await asyncio.sleep(0.2)  # several turns of the lane: nothing was ever sent
    assert engine.requests == []


async def test_a_cancel_ends_the_unsent_requests_as_canceled(
    gateway: Gateway, engine: FakeEngine
) -> None:
    client = gateway.claude(await gateway.key(await gateway.group("team")))
    engine.behaviour = Behaviour(hang=0.3)
    made = await client.messages.batches.create(
        requests=[request(f"r{n}", f"text {n}") for n in range(20)]
    )
    await seen(engine, 1)
    with pytest.raises(anthropic.BadRequestError):  # still processing: cancel it first
        await client.messages.batches.delete(made.id)
    with pytest.raises(anthropic.BadRequestError):  # no results yet
        await client.get(f"/v1/messages/batches/{made.id}/results", cast_to=object)
    canceling = await client.messages.batches.cancel(made.id)
    assert canceling.processing_status == "canceling"
    assert canceling.cancel_initiated_at is not None
    sent_when_cancelled = len(engine.requests)

    done = await ended(client, made.id)
    counts = done.request_counts
    assert len(engine.requests) == sent_when_cancelled < 20  # nothing sent after the cancel
    assert counts.succeeded == len(engine.requests) and counts.processing == 0
    assert counts.succeeded + counts.canceled == 20
    found = await results(client, made.id)
    assert len(found) == 20
    assert sum(result.type == "canceled" for result in found.values()) == counts.canceled
    assert (await client.messages.batches.cancel(made.id)).processing_status == "ended"


async def test_failed_and_expired_requests_end_in_anthropics_shapes(
    gateway: Gateway, engine: FakeEngine
) -> None:
    client = gateway.claude(await gateway.key(await gateway.group("team")))
    made = await client.messages.batches.create(
        requests=[request("fine", "ok"), request("broken", "x", model="chat-broken")]
    )
    done = await ended(client, made.id)
    assert (done.request_counts.succeeded, done.request_counts.errored) == (1, 1)
    found = await results(client, made.id)
    assert found["fine"].type == "succeeded"
    failed = found["broken"]
    assert failed.type == "errored" and failed.error.type == "error"
    assert failed.error.error.type == "api_error" and failed.error.error.message
    assert failed.error.request_id.startswith("batch_req_")

    engine.behaviour = Behaviour(hang=0.3)
    late = await client.messages.batches.create(
        requests=[request(f"r{n}", f"text {n}") for n in range(12)]
    )
    await seen(engine, 2)
    store: Any = gateway.services.store
    past = datetime.now(UTC) - timedelta(seconds=1)
    expire = update(batches).where(batches.c.id == late.id).values(expires_at=past)
    await store.database.transaction(lambda conn: conn.execute(expire))
    done = await ended(client, late.id)
    counts = done.request_counts
    assert counts.expired > 0 and counts.succeeded + counts.expired == 12
    found = await results(client, late.id)
    assert sum(result.type == "expired" for result in found.values()) == counts.expired


async def test_another_groups_message_batch_is_a_404(gateway: Gateway) -> None:
    owner = gateway.claude(await gateway.key(await gateway.group("owner")))
    stranger = await gateway.key(await gateway.group("other"))
    other = gateway.claude(stranger)
    made = await owner.messages.batches.create(requests=[request("x", "mine")])
    for attempt in (
        other.messages.batches.retrieve(made.id),
        other.messages.batches.cancel(made.id),
        other.messages.batches.delete(made.id),
    ):
        with pytest.raises(anthropic.NotFoundError):
            await attempt
    assert [b async for b in other.messages.batches.list()] == []
    await ended(owner, made.id)
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{gateway.base_url}/v1/messages/batches/{made.id}/results",
            headers={"x-api-key": stranger, "anthropic-version": "2023-06-01"},
        ) as reply,
    ):
        assert reply.status == 404
        assert (await reply.json())["error"]["type"] == "not_found_error"


async def test_a_restart_ends_the_requests_in_flight_as_errored_never_sent_again(
    start: StartGateway, engine: FakeEngine
) -> None:
    first = await start()
    key = await first.key(await first.group("team"))
    engine.behaviour = Behaviour(hang=30)  # the first request is in flight at the stop
    made = await first.claude(key).messages.batches.create(
        requests=[request(f"r{n}", f"text {n}") for n in range(3)]
    )
    await seen(engine, 1)
    await first.stop()
    (in_flight,) = [r.body["messages"][0]["content"] for r in engine.requests]

    engine.behaviour = Behaviour()
    second = await start()
    client = second.claude(key)
    began = time.monotonic()
    done = await ended(client, made.id)
    # the first ended its lease as it stopped: its line is the second's at once, not
    # after batches.lease_seconds (30 s)
    assert time.monotonic() - began < 15
    assert (done.request_counts.succeeded, done.request_counts.errored) == (2, 1)
    sent = sorted(r.body["messages"][0]["content"] for r in engine.requests)
    assert sent == [f"text {n}" for n in range(3)]  # each once, no more
    found = await results(client, made.id)
    lost = found[f"r{in_flight.split()[1]}"]
    assert lost.type == "errored" and lost.error.error.type == "api_error"
    assert "not sent again" in lost.error.error.message
