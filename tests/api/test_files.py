"""The files API through the official SDK, on SQLite (bytes in a folder beside the
database) and on PostgreSQL (bytes in the database, in chunks): private to a group,
bounded per file and per group, paged as OpenAI pages them."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from sqlalchemy import func, select

from parley.store.schema import file_chunks
from tests.api.harness import Gateway, StartGateway, call, default_config, starting
from tests.upstreams.openai_compatible import FakeEngine

CHUNK = 1000
"""A small ``files.chunk_bytes``, so a test file spans several chunks."""


@pytest.fixture
async def start(
    engine: FakeEngine, database_url: str, tmp_path: Path
) -> AsyncIterator[StartGateway]:
    def config() -> dict[str, Any]:
        settings = default_config(engine.base_url, tmp_path)
        settings["database"] = {"url": database_url}
        settings["files"] = {"chunk_bytes": CHUNK, "max_file_bytes": 20_000}
        return settings

    async with starting(config) as start:
        yield start


@pytest.fixture
async def gateway(start: StartGateway) -> Gateway:
    return await start()


def payload(size: int) -> bytes:
    return bytes(i % 251 for i in range(size))


async def kept_pieces(gateway: Gateway, file_id: str) -> int:
    """How many pieces of the file the deployment keeps: chunks in the database, or 1
    for a file of the folder beside a SQLite database."""
    store: Any = gateway.services.store
    if store.database.dialect == "postgresql":
        query = select(func.count()).where(file_chunks.c.file_id == file_id)
        return int(await store.database.read(lambda conn: conn.execute(query).scalar_one()))
    folder = Path(gateway.settings.database.url.removeprefix("sqlite:///")).with_name(
        "parley-files"
    )
    return int((folder / file_id).exists())


async def test_a_file_goes_up_is_listed_read_back_and_deleted(gateway: Gateway) -> None:
    client = gateway.client(await gateway.key(await gateway.group("team")))
    data = payload(4500)  # five chunks
    made = await client.files.create(file=("input.jsonl", data), purpose="batch")
    assert made.id.startswith("file-") and made.object == "file"
    assert (made.bytes, made.filename, made.purpose) == (4500, "input.jsonl", "batch")
    assert await kept_pieces(gateway, made.id) == (
        5 if gateway.settings.database.url.startswith("postgres") else 1
    )

    assert (await client.files.retrieve(made.id)).bytes == 4500
    assert (await client.files.content(made.id)).content == data
    listed = [f.id async for f in client.files.list()]
    assert listed == [made.id]

    deleted = await client.files.delete(made.id)
    assert deleted.deleted and deleted.id == made.id
    assert await kept_pieces(gateway, made.id) == 0
    with pytest.raises(openai.NotFoundError):
        await client.files.retrieve(made.id)


async def test_another_groups_file_is_a_404_everywhere(gateway: Gateway) -> None:
    owner = gateway.client(await gateway.key(await gateway.group("owner")))
    other_key = await gateway.key(await gateway.group("other"))
    other = gateway.client(other_key)
    made = await owner.files.create(file=("mine.txt", b"private"), purpose="user_data")

    with pytest.raises(openai.NotFoundError):
        await other.files.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        await other.files.content(made.id)
    with pytest.raises(openai.NotFoundError):
        await other.files.delete(made.id)
    assert [f.id async for f in other.files.list()] == []
    status, body = await call(gateway, "GET", "/v1/files/file-../etc", other_key)
    assert status == 404 and body["error"]["type"] == "invalid_request_error"
    assert (await owner.files.content(made.id)).content == b"private"


async def test_a_file_over_its_limit_or_the_groups_is_refused_and_not_kept(
    start: StartGateway,
) -> None:
    gateway = await start(lambda c: c["files"].update(max_group_bytes=30_000))
    client = gateway.client(await gateway.key(await gateway.group("team")))
    with pytest.raises(openai.APIStatusError) as too_large:
        await client.files.create(file=("big.jsonl", payload(20_001)), purpose="batch")
    assert too_large.value.status_code == 413
    assert "20000 bytes" in too_large.value.message
    assert [f async for f in client.files.list()] == []

    await client.files.create(file=("a.jsonl", payload(20_000)), purpose="batch")
    with pytest.raises(openai.APIStatusError) as group_full:
        await client.files.create(file=("b.jsonl", payload(10_001)), purpose="batch")
    assert group_full.value.status_code == 413
    assert "30000 bytes" in group_full.value.message
    assert len([f async for f in client.files.list()]) == 1
    if not gateway.settings.database.url.startswith("postgres"):
        folder = Path(gateway.settings.database.url.removeprefix("sqlite:///")).with_name(
            "parley-files"
        )
        assert len(await asyncio.to_thread(os.listdir, folder)) == 1  # no partial file left behind


async def test_a_purpose_or_expiry_out_of_bounds_is_a_400(gateway: Gateway) -> None:
    client = gateway.client(await gateway.key(await gateway.group("team")))
    with pytest.raises(openai.BadRequestError) as wrong:
        await client.files.create(file=("x.jsonl", b"{}"), purpose="fine-tune")
    assert wrong.value.body["param"] == "purpose"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as short:
        await client.files.create(
            file=("x.jsonl", b"{}"),
            purpose="batch",
            expires_after={"anchor": "created_at", "seconds": 60},
        )
    assert "3600" in short.value.message
    made = await client.files.create(
        file=("x.jsonl", b"{}"),
        purpose="batch",
        expires_after={"anchor": "created_at", "seconds": 3600},
    )
    assert made.expires_at is not None and made.expires_at - made.created_at in (3599, 3600, 3601)
    assert [f async for f in client.files.list()] == [made]


async def test_files_are_paged_newest_first_with_after_and_limit(gateway: Gateway) -> None:
    client = gateway.client(await gateway.key(await gateway.group("team")))
    made = [
        (await client.files.create(file=(f"{n}.txt", b"x"), purpose="user_data")).id
        for n in range(5)
    ]
    first = await client.files.list(limit=2)
    assert [f.id for f in first.data] == made[:-3:-1] and first.has_more
    everything = [f.id async for f in await client.files.list(limit=2)]  # the SDK pages on
    assert everything == made[::-1]
    oldest_first = await client.files.list(order="asc", after=made[1], limit=10)
    assert [f.id for f in oldest_first.data] == made[2:] and not oldest_first.has_more
    assert [f.id async for f in client.files.list(purpose="batch")] == []
    for limit in ("0", "10001", "1" * 5000, "٣"):  # none a page size; 5,000 digits: no 500
        with pytest.raises(openai.BadRequestError) as refused:
            await client.files.list(limit=limit)  # type: ignore[arg-type]
        assert refused.value.body["param"] == "limit"  # type: ignore[index]


async def test_files_count_against_the_groups_request_rate(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("slow", rpm=2))
    client = gateway.client(key)
    await client.files.create(file=("a.txt", b"a"), purpose="user_data")
    await client.files.list()
    with pytest.raises(openai.RateLimitError):
        await client.files.list()
