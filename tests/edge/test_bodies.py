"""Slow bodies are bounded (a deadline each, a number per key), and so is a slow head;
JSON deeper than the nesting limit is refused at parse time, before anything is metered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import orjson
import pytest

from parley.api.body import MAX_JSON_DEPTH
from parley.domain.keys import display_prefix
from parley.edge.bodies import PENDING_BODIES
from tests.api.harness import Gateway
from tests.edge.corpus import RawReply, exchange, parse_reply
from tests.edge.test_malformed_http import assert_envelope, port_of

StartGateway = Callable[..., Awaitable[Gateway]]
WAIT_SECONDS = 10.0
HELLO = {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]}


def slow_head(key: str, length: int = 100_000) -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + key.encode() + b"\r\nContent-Length: %d\r\n\r\n{" % length
    )


@asynccontextmanager
async def connection(
    port: int, first: bytes
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(first)
    await writer.drain()
    try:
        yield reader, writer
    finally:
        writer.close()


async def read_until_closed(reader: asyncio.StreamReader) -> RawReply:
    received = b""
    async with asyncio.timeout(WAIT_SECONDS):
        try:
            while chunk := await reader.read(65536):
                received += chunk
        except ConnectionError:
            pass
    return parse_reply(received)


async def eventually(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` (state the server changes on its own) until true, or fail."""
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            while not check():  # noqa: ASYNC110 (no event to wait on: the app's own state)
                await asyncio.sleep(0.02)
    except TimeoutError:
        pytest.fail(f"{what}: not within {WAIT_SECONDS:g}s")


def settings(**server: Any) -> Callable[[dict[str, Any]], None]:
    def tweak(config: dict[str, Any]) -> None:
        config["server"] = {**config.get("server", {}), **server}

    return tweak


async def test_a_body_that_trickles_past_its_deadline_gets_408_and_a_closed_connection(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(settings(body_timeout_seconds=0.5))
    key = await gateway.key(await gateway.group("team"))
    async with connection(port_of(gateway), slow_head(key)) as (reader, writer):
        for _ in range(3):  # a byte now and then: the deadline is for the whole body
            await asyncio.sleep(0.1)
            writer.write(b" ")
        reply = await read_until_closed(reader)  # the server closes: this returns
    assert reply.status == 408
    assert_envelope(reply, "slow body")
    assert orjson.loads(reply.body)["error"]["code"] == "request_timeout"
    assert reply.headers.get("connection") == "close"
    assert await gateway.usage_count() == 0


async def test_an_unread_trickling_body_is_dropped_after_the_reply(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(settings(body_timeout_seconds=0.5))
    key = await gateway.key(await gateway.group("team"))
    head = (
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "
        + key.encode()
        + b"\r\nContent-Length: 100000\r\n\r\nx"
    )
    async with connection(port_of(gateway), head) as (reader, _):
        reply = await read_until_closed(reader)  # the server closes: this returns
    assert reply.status == 200


async def test_a_key_may_have_only_so_many_bodies_arriving_at_once(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(settings(pending_bodies_per_key=2))
    group = await gateway.group("team")
    key, other_key = await gateway.key(group), await gateway.key(group)
    pending = gateway.runner.app[PENDING_BODIES] if gateway.runner else None
    assert pending is not None
    records = {r.prefix: r.id for r in await gateway.services.store.list_keys(group.id)}
    record_id, other_id = records[display_prefix(key)], records[display_prefix(other_key)]
    port = port_of(gateway)
    async with connection(port, slow_head(key)), connection(port, slow_head(key)):
        await eventually(lambda: pending.pending(record_id) == 2, "two bodies held")
        refused = await exchange(port, [slow_head(key)])
        assert refused.status == 429
        assert_envelope(refused, "third slow body")
        assert refused.headers.get("connection") == "close"
        async with connection(port, slow_head(other_key)):  # another key has its own slots
            await eventually(lambda: pending.pending(other_id) == 1, "the other key's slot")
    await eventually(lambda: pending.pending(record_id) == 0, "slots released on close")
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/chat/completions", json=HELLO, headers={"Authorization": f"Bearer {key}"}
        ) as reply,
    ):
        assert reply.status == 200


async def test_a_request_head_that_never_ends_is_closed_after_the_keepalive_time(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(settings(keepalive_seconds=0.5))
    async with connection(port_of(gateway), b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n") as (
        reader,
        writer,
    ):
        for _ in range(3):
            await asyncio.sleep(0.1)
            writer.write(b"X-Slow: 1\r\n")
        reply = await read_until_closed(reader)
    assert reply.status is None  # closed, without a reply


def nested(levels: int) -> bytes:
    """A chat body ``levels`` deep (the body itself is level 1)."""
    meta = b"[" * (levels - 1) + b"1" + b"]" * (levels - 1)
    return orjson.dumps(HELLO)[:-1] + b',"meta":' + meta + b"}"


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 255, 1000])
async def test_json_deeper_than_the_limit_is_refused_before_anything_is_metered(
    gateway: Gateway, key: str, levels: int
) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/chat/completions",
            data=nested(levels),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        ) as reply,
    ):
        assert reply.status == 400
        error = (await reply.json())["error"]
    assert error["code"] == "json_too_deep"
    assert str(MAX_JSON_DEPTH) in error["message"]
    assert await gateway.usage_count() == 0


async def test_json_at_the_limit_is_relayed(gateway: Gateway, key: str) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/chat/completions",
            data=nested(MAX_JSON_DEPTH),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        ) as reply,
    ):
        assert reply.status == 200, await reply.text()
    assert await gateway.usage_count() == 1
