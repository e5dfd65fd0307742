"""Batches through the official SDK, on SQLite and PostgreSQL: Parley runs each line as
a call of its own at the model's batch price, validates the input file by line, keeps
every batch private to its group, stops at a cancel, and never sends a line twice across
a restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from sqlalchemy import update

from parley.api.batch_lane import BATCH_LANE
from parley.domain.pricing import Price, usd_to_nanos
from parley.store.schema import batches
from tests.api.harness import Gateway, StartGateway, default_config, records, starting
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

FINAL = ("completed", "failed", "expired", "cancelled")


@pytest.fixture
async def start(
    engine: FakeEngine, database_url: str, tmp_path: Path
) -> AsyncIterator[StartGateway]:
    def config() -> dict[str, Any]:
        settings = default_config(engine.base_url, tmp_path)
        settings["database"] = {"url": database_url}
        settings["models"][0]["prices"]["batch_discount"] = "0.5"
        settings["batches"] = {
            "poll_seconds": 0.05,
            "concurrency": 4,
            "per_channel": 2,
            "adaptive": False,  # a fixed share: two lines in flight at once
        }
        settings["channels"][0]["timeouts"] = {"connect": 2, "read": 60}
        settings["channels"][0]["models"] += [
            {"name": "embed-small"},
            {"name": "chat-broken", "upstream": "upstream-chat+fail-500"},
        ]
        settings["models"] += [
            {"name": "embed-small", "kind": "embedding", "prices": {"input_per_1k": "0.0001"}},
            {"name": "chat-broken", "kind": "chat"},
        ]
        return settings

    async with starting(config) as start:
        yield start


@pytest.fixture
async def gateway(start: StartGateway) -> Gateway:
    return await start()


def chat_line(custom_id: str, text: str, *, model: str = "chat-large", **extra: Any) -> bytes:
    line = {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": text}]},
        **extra,
    }
    return orjson.dumps(line)


def input_file(lines: list[bytes]) -> bytes:
    return b"\n".join(lines) + b"\n"


async def settled(client: openai.AsyncOpenAI, batch_id: str) -> Any:
    """The batch once it reached a final status (polled as a client would)."""
    for _ in range(2000):
        batch = await client.batches.retrieve(batch_id)
        if batch.status in FINAL:
            return batch
        await asyncio.sleep(0.02)
    raise AssertionError(f"batch {batch_id} is still {batch.status}")


async def requests_seen(engine: FakeEngine, count: int) -> None:
    """Once the engine has received ``count`` requests."""
    for _ in range(2000):
        if len(engine.requests) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the engine received {len(engine.requests)} requests, not {count}")


async def file_lines(client: openai.AsyncOpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    content = (await client.files.content(file_id)).content
    return [orjson.loads(line) for line in content.splitlines()]


async def submitted(client: openai.AsyncOpenAI, lines: list[bytes], **extra: Any) -> Any:
    made = await client.files.create(file=("in.jsonl", input_file(lines)), purpose="batch")
    return await client.batches.create(
        input_file_id=made.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        **extra,
    )


async def test_a_batch_runs_every_line_once_at_the_batch_price(
    gateway: Gateway, engine: FakeEngine
) -> None:
    client = gateway.client(await gateway.key(await gateway.group("team")))
    lines = [chat_line(f"line-{n}", f"hello number {n}") for n in range(5)]
    batch = await submitted(client, lines, metadata={"job": "nightly"})
    assert batch.status == "in_progress" and batch.request_counts.total == 5
    assert batch.metadata == {"job": "nightly"}

    done = await settled(client, batch.id)
    assert done.status == "completed" and done.error_file_id is None
    assert (done.request_counts.completed, done.request_counts.failed) == (5, 0)
    output = await file_lines(client, done.output_file_id)
    by_id = {line["custom_id"]: line for line in output}
    assert sorted(by_id) == [f"line-{n}" for n in range(5)]
    reply = by_id["line-3"]["response"]
    assert reply["status_code"] == 200
    assert reply["body"]["choices"][0]["message"]["content"] == "echo: hello number 3"
    assert reply["body"]["model"] == "chat-large"
    assert reply["request_id"] == by_id["line-3"]["id"]
    sent = [r.body["messages"][0]["content"] for r in engine.requests]
    assert sorted(sent) == sorted(f"hello number {n}" for n in range(5))

    full = Price(
        input_per_1k=usd_to_nanos(Decimal("0.00001")),
        output_per_1k=usd_to_nanos(Decimal("0.00003")),
    )
    logged = {r.request_id: r for r in await records(gateway)}
    assert set(logged) == {line["id"] for line in output}  # each line metered once
    for record in logged.values():
        assert record.request_id.startswith("batch_req_") and record.status == 200
        interactive = full.cost(
            prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens
        )
        assert record.cost_nanos * 2 == interactive > 0  # half the interactive price
    assert [b.id async for b in client.batches.list()] == [batch.id]
    with pytest.raises(openai.ConflictError):
        await client.batches.cancel(batch.id)


async def test_an_input_file_with_problems_fails_naming_each_line(
    start: StartGateway, engine: FakeEngine
) -> None:
    gateway = await start()
    group = await gateway.group("narrow", models=["chat-large"])
    client = gateway.client(await gateway.key(group))
    lines = [
        chat_line("a", "fine"),
        chat_line("b", "wrong url", url="/v1/embeddings"),
        chat_line("a", "same id again"),
        chat_line("c", "a model the group may not use", model="vision-small"),
        b"{not json",
        chat_line("d", "get", method="GET"),
    ]
    batch = await submitted(client, lines)
    assert batch.status == "failed" and batch.failed_at is not None
    assert batch.errors is not None
    problems = [(e.line, e.code) for e in batch.errors.data]
    assert problems == [
        (2, "mismatched_endpoint"),
        (3, "duplicate_custom_id"),
        (4, "model_not_found"),
        (5, "invalid_json_line"),
        (6, "invalid_method"),
    ]
    await asyncio.sleep(0.2)  # several turns of the lane: nothing of it is ever sent
    assert engine.requests == []
    assert (await client.batches.retrieve(batch.id)).status == "failed"


async def test_another_groups_batch_and_file_are_404s(gateway: Gateway) -> None:
    owner = gateway.client(await gateway.key(await gateway.group("owner")))
    other = gateway.client(await gateway.key(await gateway.group("other")))
    batch = await submitted(owner, [chat_line("x", "mine")])
    with pytest.raises(openai.NotFoundError):
        await other.batches.retrieve(batch.id)
    with pytest.raises(openai.NotFoundError):
        await other.batches.cancel(batch.id)
    with pytest.raises(openai.NotFoundError):
        await other.batches.create(
            input_file_id=batch.input_file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
    assert [b async for b in other.batches.list()] == []
    done = await settled(owner, batch.id)
    with pytest.raises(openai.NotFoundError):
        await other.files.content(done.output_file_id)


async def test_a_cancel_stops_new_lines_and_ends_with_what_was_done(
    gateway: Gateway, engine: FakeEngine
) -> None:
    client = gateway.client(await gateway.key(await gateway.group("team")))
    engine.behaviour = Behaviour(hang=0.3)
    batch = await submitted(client, [chat_line(f"l{n}", f"text {n}") for n in range(30)])
    await requests_seen(engine, 1)
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{gateway.base_url}/metrics") as got,
    ):
        assert 'parley_batch_lines_in_flight{channel="engine"}' in await got.text()
    cancelling = await client.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    sent_when_cancelled = len(engine.requests)
    done = await settled(client, batch.id)
    assert done.status == "cancelled" and done.cancelled_at is not None
    assert len(engine.requests) == sent_when_cancelled < 30  # nothing sent after the cancel
    finished = done.request_counts.completed + done.request_counts.failed
    assert finished == len(await file_lines(client, done.output_file_id)) == len(engine.requests)
    assert done.request_counts.total == 30
    assert (await client.batches.cancel(batch.id)).status == "cancelled"


async def test_a_restart_never_sends_a_line_twice(start: StartGateway, engine: FakeEngine) -> None:
    first = await start()
    key = await first.key(await first.group("team"))
    client = first.client(key)
    engine.behaviour = Behaviour(hang=30)  # the first lines are in flight at the stop
    lines = [chat_line(f"l{n}", f"text {n}") for n in range(6)]
    batch = await submitted(client, lines)
    await requests_seen(engine, 2)
    await first.stop()
    in_flight = [r.body["messages"][0]["content"] for r in engine.requests]

    engine.behaviour = Behaviour()
    second = await start()
    done = await settled(second.client(key), batch.id)
    assert done.status == "completed"
    sent = [r.body["messages"][0]["content"] for r in engine.requests]
    assert sorted(sent) == sorted(f"text {n}" for n in range(6))  # each once, no more
    errors = await file_lines(second.client(key), done.error_file_id)
    interrupted = sorted(e["custom_id"] for e in errors)
    assert interrupted == sorted(f"l{text.split()[1]}" for text in in_flight)
    assert {e["error"]["code"] for e in errors} == {"interrupted"}
    assert done.request_counts.failed == len(in_flight) == 2
    assert done.request_counts.completed == 4


async def test_embeddings_and_failed_lines_end_in_their_files(gateway: Gateway) -> None:
    client = gateway.client(await gateway.key(await gateway.group("team")))
    lines = [
        orjson.dumps(
            {
                "custom_id": f"e{n}",
                "method": "POST",
                "url": "/v1/embeddings",
                "body": {"model": "embed-small", "input": f"some words {n}"},
            }
        )
        for n in range(3)
    ]
    made = await client.files.create(file=("e.jsonl", input_file(lines)), purpose="batch")
    batch = await client.batches.create(
        input_file_id=made.id, endpoint="/v1/embeddings", completion_window="24h"
    )
    done = await settled(client, batch.id)
    assert (done.status, done.request_counts.completed) == ("completed", 3)
    output = await file_lines(client, done.output_file_id)
    assert {line["response"]["body"]["model"] for line in output} == {"embed-small"}
    assert all(len(line["response"]["body"]["data"][0]["embedding"]) for line in output)

    broken = await submitted(
        client, [chat_line("ok", "fine"), chat_line("no", "x", model="chat-broken")]
    )
    ended = await settled(client, broken.id)
    assert (ended.request_counts.completed, ended.request_counts.failed) == (1, 1)
    (failure,) = await file_lines(client, ended.error_file_id)
    assert failure["custom_id"] == "no" and failure["response"]["status_code"] == 502
    assert failure["response"]["body"]["error"]["type"] == "upstream_error"
    failed_record = [r for r in await records(gateway) if r.request_id == failure["id"]]
    assert [(r.status, r.cost_nanos) for r in failed_record] == [(502, 0)]


async def test_expiry_stops_new_lines_and_sends_the_rest_to_the_error_file(
    gateway: Gateway, engine: FakeEngine
) -> None:
    client = gateway.client(await gateway.key(await gateway.group("team")))
    engine.behaviour = Behaviour(hang=0.3)
    batch = await submitted(client, [chat_line(f"l{n}", f"text {n}") for n in range(20)])
    await requests_seen(engine, 1)
    store: Any = gateway.services.store
    past = datetime.now(UTC) - timedelta(seconds=1)
    ended = update(batches).where(batches.c.id == batch.id).values(expires_at=past)
    await store.database.transaction(lambda conn: conn.execute(ended))
    sent_by_then = len(engine.requests)

    done = await settled(client, batch.id)
    assert done.status == "expired" and done.expired_at is not None
    assert len(engine.requests) <= sent_by_then + 2  # at most what was starting then
    errors = await file_lines(client, done.error_file_id)
    answered = await file_lines(client, done.output_file_id)
    assert len(errors) + len(answered) == 20
    assert len(answered) == len(engine.requests)
    assert {e["error"]["code"] for e in errors} == {"batch_expired"}


async def test_a_batch_leaves_its_groups_interactive_calls_their_share_of_the_rate(
    gateway: Gateway, engine: FakeEngine
) -> None:
    key = await gateway.key(await gateway.group("team", rpm=4))  # rate_reserve 0.25: 1 left
    client = gateway.client(key)
    store = gateway.services.store
    # the upload and the create take two requests: two are left, one of them for the lane
    batch = await submitted(client, [chat_line(f"l{n}", f"text {n}") for n in range(4)])
    for _ in range(2000):
        running = await store.find_batch(batch.id, None)
        if running is not None and running.completed:
            break
        await asyncio.sleep(0.01)
    reply = await client.chat.completions.create(
        model="chat-large", messages=[{"role": "user", "content": "interactive"}]
    )
    assert reply.choices[0].message.content == "echo: interactive"
    found = await store.find_batch(batch.id, None)
    assert found is not None and (found.status, found.completed) == ("in_progress", 1)
    assert [r.body["messages"][0]["content"] for r in engine.requests][-1] == "interactive"


async def test_the_lanes_share_of_a_channel_starts_low_and_yields_to_interactive_429s(
    start: StartGateway, engine: FakeEngine
) -> None:
    def tweak(config: dict[str, Any]) -> None:
        config["batches"].update(per_channel=4, concurrency=8, adaptive=True, grow_seconds=60)
        config["channels"][0]["models"].append(
            {"name": "chat-busy", "upstream": "upstream-chat+fail-429"}
        )
        config["models"].append({"name": "chat-busy", "kind": "chat"})

    gateway = await start(tweak)
    client = gateway.client(await gateway.key(await gateway.group("team")))
    assert gateway.runner is not None
    lane = gateway.runner.app[BATCH_LANE]
    engine.behaviour = Behaviour(hang=0.2)
    batch = await submitted(client, [chat_line(f"l{n}", f"text {n}") for n in range(40)])
    most = 0
    for _ in range(40):  # 0.8 s: four lines' time, had the lane taken its whole share
        most = max(most, lane.in_flight_by_channel().get("engine", 0))
        await asyncio.sleep(0.02)
    assert most == 1  # a channel's share starts at one line
    assert lane.share.limit("engine") == 1

    with pytest.raises(openai.APIStatusError):
        await client.chat.completions.create(
            model="chat-busy", messages=[{"role": "user", "content": "interactive"}]
        )
    assert lane.share.limit("engine") == 0  # the channel is busy: the lane yields it all
    await asyncio.sleep(0.4)  # the line in flight ends
    sent = len(engine.requests)
    await asyncio.sleep(0.6)
    assert len(engine.requests) == sent  # no batch line sent since
    assert lane.in_flight_by_channel()["engine"] == 0
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{gateway.base_url}/metrics") as got,
    ):
        assert 'parley_batch_lane_share{channel="engine"} 0.0' in await got.text()
    await client.batches.cancel(batch.id)
    assert (await settled(client, batch.id)).status == "cancelled"
