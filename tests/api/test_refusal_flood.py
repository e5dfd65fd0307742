"""A flood of refused calls stays visible in the request log at a bounded cost: the
first few refusals of a key, status and code in a minute are lines of their own, and one
more line counts the rest, so 1,000 refusals take a handful of rows whose counts add up
to 1,000."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from sqlalchemy import func, select

from parley.domain.keys import digest
from parley.runtime.refusal_rows import ROWS_PER_MINUTE, SECONDS_PER_MINUTE
from parley.store.schema import usage_records
from tests.api.admin_client import ADMIN, call
from tests.api.harness import Gateway

FLOOD = 1_000
SENDERS = 8
BODY = {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]}


async def flood(gateway: Gateway, key: str) -> list[int]:
    """``FLOOD`` calls from ``SENDERS`` keep-alive connections; their statuses."""
    statuses: list[int] = []
    headers = {"Authorization": f"Bearer {key}"}

    async def send(count: int) -> None:
        async with aiohttp.ClientSession(headers=headers) as session:
            for _ in range(count):
                async with session.post(f"{gateway.v1}/chat/completions", json=BODY) as reply:
                    await reply.read()
                    statuses.append(reply.status)

    await asyncio.gather(*(send(FLOOD // SENDERS) for _ in range(SENDERS)))
    return statuses


async def refused_rows(gateway: Gateway, key_id: int) -> tuple[int, int]:
    """A key's lines of status 429 in the store, and the requests they count."""
    store: Any = gateway.services.store
    records = usage_records.c
    query = select(func.count(), func.sum(records.request_count)).where(
        records.key_id == key_id, records.status == 429
    )
    rows, counted = await store.database.read(lambda conn: conn.execute(query).one())
    return int(rows), int(counted or 0)


async def test_a_flood_of_refusals_takes_bounded_rows_and_counts_every_one(
    start_gateway: Any,
) -> None:
    def with_admin(config: dict[str, Any]) -> None:
        config["admin"] = {"token": ADMIN}

    gateway = await start_gateway(with_admin)
    group = await gateway.group("flooded", rpm=1)
    key = await gateway.key(group)
    record = gateway.services.directory.cached_key(digest(key))
    assert record is not None
    status, _ = await call(gateway, "POST", "/v1/chat/completions", key, BODY)
    assert status == 200  # the minute's one admitted call

    began = time.time()
    statuses = await flood(gateway, key)
    ended = time.time()
    assert statuses == [429] * FLOOD
    minutes = int(ended) // SECONDS_PER_MINUTE - int(began) // SECONDS_PER_MINUTE + 1
    await gateway.stop()  # the lines counting the rest of a minute are written by now

    again = await start_gateway(with_admin)  # the same database
    rows, counted = await refused_rows(again, record.id)
    assert rows <= (ROWS_PER_MINUTE + 1) * minutes, rows
    assert counted == FLOOD

    status, page = await call(again, "GET", f"/admin/requests?key={record.id}&status=429&limit=500")
    assert status == 200
    lines = page["data"]
    assert len(lines) == rows and sum(line["requests"] for line in lines) == FLOOD
    assert all(line["admitted"] is False for line in lines)
    counting = [line for line in lines if line["requests"] > 1]
    assert counting and all(line["error_code"] == "rate_limit_exceeded" for line in counting)
