"""Stored responses through the gateway, on SQLite and on PostgreSQL alike: an id that
cannot be one of Parley's is a 404 before the store is asked, and a conversation's
storage grows with its length, not its square."""

from __future__ import annotations

import logging
import secrets
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import asyncpg
import pytest

from parley.domain.responses import is_response_id
from tests.api.harness import CHANNEL_KEY, Gateway, starting
from tests.api.responses_harness import Upstreams, responses_config
from tests.contract.test_store import POSTGRES_URL, postgres_execute
from tests.upstreams.anthropic import FakeAnthropic
from tests.upstreams.openai_compatible import FakeEngine

NOT_IDS = [
    "resp_a\x00b",  # PostgreSQL refuses a NUL in text: it was a 500 and an ERROR line
    "resp_" + "a" * 96,  # longer than the store's column
    "resp_a b",
    "msg_abc",
    "resp_",
    "resp_é",
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'parley.db'}"
        return
    database = f"stored_{secrets.token_hex(6)}"
    try:
        await postgres_execute(f'CREATE DATABASE "{database}"')
    except (OSError, asyncpg.PostgresError) as error:
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL} ({error})")
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{database}"
    finally:
        await postgres_execute(f'DROP DATABASE "{database}" WITH (FORCE)')


@pytest.fixture
async def upstreams(database_url: str, tmp_path: Path) -> AsyncIterator[Upstreams]:
    def config() -> dict[str, Any]:
        settings = responses_config(engine.base_url, anthropic.base_url, tmp_path)
        settings["database"] = {"url": database_url}
        (native,) = [c for c in settings["channels"] if c.get("responses") == "native"]
        native["models"].append({"name": "gpt-odd-id", "upstream": "upstream-native+odd-id"})
        settings["models"].append({"name": "gpt-odd-id"})
        return settings

    async with (
        FakeEngine(api_key=CHANNEL_KEY) as engine,
        FakeAnthropic(api_key=CHANNEL_KEY) as anthropic,
        starting(config) as start,
    ):
        yield Upstreams(engine, anthropic, await start())


@pytest.fixture
def gateway(upstreams: Upstreams) -> Gateway:
    return upstreams.gateway


@pytest.fixture
async def key(gateway: Gateway) -> str:
    return await gateway.key(await gateway.group("team"))


async def test_an_id_that_cannot_be_ours_is_a_404_on_every_route(
    gateway: Gateway, key: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = await gateway.client(key).responses.create(model="gpt-like", input="hi")
    await gateway.services.responses.flush()  # written: a read would reach the store
    asked = count_store_calls(monkeypatch, gateway.services.store)
    headers = {"Authorization": f"Bearer {key}"}
    with caplog.at_level(logging.WARNING):
        async with aiohttp.ClientSession(headers=headers) as session:
            for wrong in NOT_IDS:
                path = f"{gateway.v1}/responses/{quote(wrong, safe='')}"
                for method, url in (
                    ("GET", path),
                    ("DELETE", path),
                    ("GET", f"{path}/input_items"),
                ):
                    async with session.request(method, url) as reply:
                        assert reply.status == 404, (method, wrong, await reply.text())
                        error = (await reply.json())["error"]
                        assert error["type"] == "invalid_request_error"
                        assert error["param"] == "response_id"
                continued = {"model": "gpt-like", "input": "more", "previous_response_id": wrong}
                async with session.post(f"{gateway.v1}/responses", json=continued) as reply:
                    assert reply.status == 404, (wrong, await reply.text())
                    error = (await reply.json())["error"]
                    assert error["code"] == "previous_response_not_found"
            assert asked == []  # never asked, so SQLite and PostgreSQL answer alike
            async with session.get(f"{gateway.v1}/responses/{stored.id}") as reply:
                assert reply.status == 200  # the store still answers a real id
    assert asked == [stored.id]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def count_store_calls(monkeypatch: pytest.MonkeyPatch, store: Any) -> list[str]:
    """The ids the store is asked about by id from now on."""
    asked: list[str] = []
    for name in ("find_response", "find_turns", "delete_response"):
        method = getattr(store, name)

        async def counted(response_id: str, *args: Any, _method: Any = method) -> Any:
            asked.append(response_id)
            return await _method(response_id, *args)

        monkeypatch.setattr(store, name, counted)
    return asked


CHAIN = 50
TURN_TEXT = ", ".join(["a turn of the conversation"] * 8)


async def test_a_conversation_is_stored_in_linear_space(
    upstreams: Upstreams, key: str, database_url: str
) -> None:
    """Each turn stores its own input and output and names the turn it continues: the
    bytes stored for 2n turns are about twice those for n, not four times (a copy of
    the whole history in every turn grows with the square of the chain)."""
    gateway = upstreams.gateway
    client = gateway.client(key)
    stored_at: dict[int, int] = {}
    previous: str | None = None
    for turn in range(1, CHAIN + 1):
        extra: dict[str, Any] = {"previous_response_id": previous} if previous else {}
        response = await client.responses.create(
            model="gpt-like", input=f"{turn}: {TURN_TEXT}", **extra
        )
        previous = response.id
        if turn in (CHAIN // 2, CHAIN):
            await gateway.services.responses.flush()
            stored_at[turn] = await stored_bytes(database_url)
    assert stored_at[CHAIN] < 2.2 * stored_at[CHAIN // 2], stored_at
    # the next turn still sends the whole conversation, oldest first
    await client.responses.create(model="gpt-like", input="end", previous_response_id=previous)
    sent = [text(message["content"]) for message in upstreams.engine.last_request.body["messages"]]
    assert len(sent) == 2 * CHAIN + 1
    assert sent[:2] == [f"1: {TURN_TEXT}", f"echo: 1: {TURN_TEXT}"]
    assert sent[-2:] == [f"echo: {CHAIN}: {TURN_TEXT}", "end"]


def text(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


SIZE = "SELECT sum(length(response) + length(input_items) + length(history)) FROM stored_responses"


async def stored_bytes(url: str) -> int:
    """The characters the stored responses' JSON columns hold, all rows together."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return int(conn.execute(SIZE).fetchone()[0])
    connection = await asyncpg.connect(url)
    try:
        return int(await connection.fetchval(SIZE))
    finally:
        await connection.close()


async def test_a_native_reply_under_an_id_no_store_keeps_carries_one_of_parleys(
    gateway: Gateway, key: str
) -> None:
    client = gateway.client(key)
    response = await client.responses.create(model="gpt-odd-id", input="hello")
    assert is_response_id(response.id)
    found = await client.responses.retrieve(response.id)
    assert found.id == response.id and found.output_text == "echo: hello"
