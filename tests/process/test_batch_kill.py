"""A ``parley serve`` killed (SIGKILL) while batch lines are in flight: started again on
the same database, it finishes the batch without sending any line twice, and the lines
that were in flight go to the error file as ``interrupted``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import openai
import orjson

from tests.process.calls import MODEL, gateway_config
from tests.process.procs import Processes, Server
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

LINES = 6


def _line(n: int) -> bytes:
    body = {"model": MODEL, "messages": [{"role": "user", "content": f"text {n}"}]}
    return orjson.dumps(
        {"custom_id": f"l{n}", "method": "POST", "url": "/v1/chat/completions", "body": body}
    )


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


async def test_a_killed_gateway_resumes_a_batch_without_sending_a_line_twice(
    procs: Processes, tmp_path: Path
) -> None:
    async with FakeEngine() as engine:
        config = gateway_config(
            engine.base_url,
            tmp_path,
            batches={"poll_seconds": 0.05, "per_channel": 2, "adaptive": False},
        )
        config["channels"][0]["timeouts"]["read"] = 60
        engine.behaviour = Behaviour(hang=60)  # the first lines are in flight at the kill
        first: Server = await asyncio.to_thread(procs.serve, config, name="first")
        key = await asyncio.to_thread(first.create_key)
        async with openai.AsyncOpenAI(base_url=first.v1, api_key=key, max_retries=0) as client:
            lines = b"\n".join(_line(n) for n in range(LINES))
            made = await client.files.create(file=("in.jsonl", lines), purpose="batch")
            batch = await client.batches.create(
                input_file_id=made.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            await _seen(engine, 2)
        await asyncio.to_thread(first.kill)
        in_flight = sorted(r.body["messages"][0]["content"] for r in engine.requests)
        assert len(in_flight) == 2

        engine.behaviour = Behaviour()
        second: Server = await asyncio.to_thread(procs.serve, config, name="second")
        async with openai.AsyncOpenAI(base_url=second.v1, api_key=key, max_retries=0) as client:
            done = await _settled(client, batch.id)
            assert done.status == "completed"
            assert done.request_counts is not None
            assert (done.request_counts.completed, done.request_counts.failed) == (4, 2)
            sent = sorted(r.body["messages"][0]["content"] for r in engine.requests)
            assert sent == sorted(f"text {n}" for n in range(LINES))  # each line once
            assert done.error_file_id is not None and done.output_file_id is not None
            errors = (await client.files.content(done.error_file_id)).content.splitlines()
            interrupted = sorted(orjson.loads(line)["custom_id"] for line in errors)
            assert interrupted == sorted(f"l{text.split()[1]}" for text in in_flight)
            assert {orjson.loads(line)["error"]["code"] for line in errors} == {"interrupted"}
