"""Two ``parley serve`` instances on one PostgreSQL database share a batch's lines; one
is killed (SIGKILL) mid-batch with lines in flight, and the other finishes the batch:
its queued lines run there, the killed one's lines in flight go to the error file as
``interrupted`` once its lease runs out, and no line reaches the upstream twice."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import openai
import orjson
import pytest

from tests.process.calls import MODEL, gateway_config
from tests.process.conftest import PostgresDatabase
from tests.process.procs import Processes, Server
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

pytestmark = [pytest.mark.postgres]

LINES = 30
LEASE_SECONDS = 1.5


def _line(n: int) -> bytes:
    body = {"model": MODEL, "messages": [{"role": "user", "content": f"text {n}"}]}
    return orjson.dumps(
        {"custom_id": f"l{n}", "method": "POST", "url": "/v1/chat/completions", "body": body}
    )


def _sent(engine: FakeEngine) -> list[str]:
    """The custom_id of each request the engine received, in order."""
    return [f"l{r.body['messages'][0]['content'].split()[1]}" for r in engine.requests]


async def _seen(engine: FakeEngine, count: int) -> None:
    for _ in range(3000):
        if len(engine.requests) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the engine received {len(engine.requests)} requests, not {count}")


async def _settled(client: openai.AsyncOpenAI, batch_id: str) -> openai.types.Batch:
    for _ in range(3000):
        batch = await client.batches.retrieve(batch_id)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return batch
        await asyncio.sleep(0.02)
    raise AssertionError(f"batch {batch_id} is still {batch.status}")


async def test_a_batch_outlives_the_instance_running_it(
    procs: Processes, tmp_path: Path, postgres_db: PostgresDatabase
) -> None:
    async with FakeEngine() as engine:
        config = gateway_config(
            engine.base_url,
            tmp_path,
            database_url=postgres_db.url,
            batches={
                "poll_seconds": 0.05,
                "per_channel": 2,
                "adaptive": False,  # two lines in flight on each instance
                "concurrency": 2,
                "lease_seconds": LEASE_SECONDS,
            },
        )
        config["channels"][0]["timeouts"]["read"] = 60
        engine.behaviour = Behaviour(hang=60)  # the first instance's lines stay in flight
        first: Server = await asyncio.to_thread(procs.serve, config, name="first")
        key = await asyncio.to_thread(first.create_key)
        async with openai.AsyncOpenAI(base_url=first.v1, api_key=key, max_retries=0) as client:
            lines = b"\n".join(_line(n) for n in range(LINES))
            made = await client.files.create(file=("in.jsonl", lines), purpose="batch")
            batch = await client.batches.create(
                input_file_id=made.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            await _seen(engine, 2)
        in_flight = _sent(engine)  # the first instance's, sent and hanging
        assert len(in_flight) == 2

        engine.behaviour = Behaviour(delay=0.2)
        second: Server = await asyncio.to_thread(procs.serve, config, name="second")
        await _seen(engine, 4)  # the second takes the batch's queued lines meanwhile
        async with openai.AsyncOpenAI(base_url=second.v1, api_key=key, max_retries=0) as client:
            running = await client.batches.retrieve(batch.id)
            assert running.request_counts is not None
            assert running.request_counts.failed == 0  # a live instance's lines are its own
        await asyncio.to_thread(first.kill)
        killed_at = len(engine.requests)
        assert killed_at < LINES  # mid-batch

        async with openai.AsyncOpenAI(base_url=second.v1, api_key=key, max_retries=0) as client:
            done = await _settled(client, batch.id)
            assert done.status == "completed"
            assert done.request_counts is not None
            assert (done.request_counts.completed, done.request_counts.failed) == (
                LINES - 2,
                2,
            )
            sent = Counter(_sent(engine))
            assert set(sent) == {f"l{n}" for n in range(LINES)}
            assert max(sent.values()) == 1  # every line reached the upstream once at most
            assert done.output_file_id is not None and done.error_file_id is not None
            errors = (await client.files.content(done.error_file_id)).content.splitlines()
            interrupted = [orjson.loads(line) for line in errors]
            assert sorted(line["custom_id"] for line in interrupted) == sorted(in_flight)
            assert {line["error"]["code"] for line in interrupted} == {"interrupted"}
            output = (await client.files.content(done.output_file_id)).content.splitlines()
            answered = {orjson.loads(line)["custom_id"] for line in output}
            assert answered == {f"l{n}" for n in range(LINES)} - set(in_flight)
