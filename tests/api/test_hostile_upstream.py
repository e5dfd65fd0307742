"""A hostile upstream, seen from the caller: a reply head past the bounds, JSON nested
deeper than Parley writes, an error message spelling the channel key every way it can.
Each is a clean answer (a 502 envelope, or an error event and ``[DONE]`` in a started
stream) metered by the usual rules, and the key reaches neither the caller nor a log."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import orjson
import pytest

from tests.api.harness import CHANNEL_KEY, Gateway, records
from tests.api.test_upstream_and_metering import MESSAGES
from tests.http.rawserver import HeadFlood, RawServer, keep_alive_reply
from tests.upstreams.completion_script import chunks_for, script_for, whole_reply
from tests.upstreams.key_spellings import exposes, spellings
from tests.upstreams.openai_compatible import Behaviour, FakeEngine
from tests.upstreams.server import sse_data

CHAT = {"model": "chat-large", "messages": MESSAGES}
STREAMED = {**CHAT, "stream": True}


async def post(
    gateway: Gateway, key: str, body: dict[str, Any], path: str = "/chat/completions"
) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.post(f"{gateway.v1}{path}", json=body) as response,
    ):
        return response.status, await response.read()


def envelope(status: int, body: bytes) -> dict[str, Any]:
    """The OpenAI envelope of a 502, checked whole."""
    assert status == 502
    error: dict[str, Any] = orjson.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"]) == ("upstream_error", "bad_gateway")
    return error


def stream_events(raw: bytes) -> list[bytes]:
    return [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")]


async def gateway_on(
    start_gateway: Any, port: int, group: str = "team", **upstream: int
) -> tuple[Gateway, str]:
    """A gateway whose channel is the raw server on ``port``; a key of a new ``group``
    (gateways a test starts share a database)."""

    def to_raw_server(config: dict[str, Any]) -> None:
        config["channels"][0]["base_url"] = f"http://127.0.0.1:{port}/v1"
        config["upstream"] = upstream

    gateway = await start_gateway(to_raw_server)
    return gateway, await gateway.key(await gateway.group(group))


def chat_reply() -> bytes:
    script = script_for("chat", {"model": "m", "messages": MESSAGES}, None, "raw")
    return orjson.dumps(whole_reply(script))


# Reply heads


@pytest.mark.parametrize("stream", [False, True])
async def test_a_reply_head_past_the_bound_is_a_502_billed_nothing(
    start_gateway: Any, stream: bool
) -> None:
    flood = HeadFlood(200, 1024 * 1024, chat_reply())
    async with flood.server as server:
        gateway, key = await gateway_on(start_gateway, server.port)
        status, body = await post(gateway, key, STREAMED if stream else CHAT)
    error = envelope(status, body)
    assert "reply head larger than Parley accepts" in error["message"]
    assert flood.written < 200, "Parley hung up long before the head's end"
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (502, 0)


async def test_the_head_bounds_are_configured_under_upstream(start_gateway: Any) -> None:
    extra = b"".join(b"X-Extra-%d: %s\r\n" % (n, b"e" * 200) for n in range(12))
    reply = keep_alive_reply(chat_reply(), b"Content-Type: application/json\r\n" + extra)
    async with RawServer.keeping_alive(reply) as server:
        default, default_key = await gateway_on(start_gateway, server.port)
        assert (await post(default, default_key, CHAT))[0] == 200
        few, few_key = await gateway_on(start_gateway, server.port, "few", max_headers=12)
        envelope(*await post(few, few_key, CHAT))
        small, small_key = await gateway_on(
            start_gateway, server.port, "small", max_head_bytes=2048
        )
        envelope(*await post(small, small_key, CHAT))


async def test_trailers_past_the_bound_end_a_started_stream_with_an_error_event(
    start_gateway: Any,
) -> None:
    script = script_for("chat", STREAMED, None, "raw")
    events = b"".join(sse_data(chunk) for chunk in chunks_for(script, False)[:3])
    written = 0

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal written
        await server.read_request(reader)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        writer.write(head + b"Transfer-Encoding: chunked\r\n\r\n")
        writer.write(b"%x\r\n%s\r\n0\r\nX-Trailer: " % (len(events), events))
        for _ in range(1024):  # 64 MiB at most, should Parley never stop reading
            writer.write(b"t" * 65536)
            await writer.drain()
            written += 1

    async with RawServer(upstream) as server:
        gateway, key = await gateway_on(start_gateway, server.port)
        status, raw = await post(gateway, key, STREAMED)
    assert status == 200
    data = stream_events(raw)
    assert data[-1] == b"[DONE]"
    error = orjson.loads(data[-2])["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "bad_gateway")
    assert len(data) == 5, "the three chunks, the error event, [DONE]"
    assert written < 256, "Parley hung up near the bound, not at the trailer's end"
    (record,) = await records(gateway)
    assert record.status == 502
    assert record.completion_tokens > 0, "billed for what was delivered"


# JSON nested deeper than Parley writes


@pytest.mark.parametrize("depth", [253, 300, 1000])
@pytest.mark.parametrize("path", ["/chat/completions", "/completions"])
async def test_a_whole_reply_nested_too_deep_is_a_502_billed_nothing(
    gateway: Gateway, key: str, engine: FakeEngine, depth: int, path: str
) -> None:
    engine.behaviour = Behaviour(deep=depth)
    body = CHAT if path == "/chat/completions" else {"model": "chat-large", "prompt": "hello"}
    error = envelope(*await post(gateway, key, body, path))
    assert "not valid JSON" in error["message"]
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos, record.completion_tokens) == (502, 0, 0)


async def test_a_reply_nested_within_the_bound_is_relayed(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(deep=100)
    status, body = await post(gateway, key, CHAT)
    assert status == 200
    value, depth = orjson.loads(body), 0
    while isinstance(value, dict | list):
        value = value["nested"] if isinstance(value, dict) else (value or [None])[0]
        depth += 1
    assert depth == 100


@pytest.mark.parametrize("depth", [253, 1000])
async def test_a_streamed_chunk_nested_too_deep_ends_the_stream_billed_for_what_came(
    gateway: Gateway, key: str, engine: FakeEngine, depth: int, caplog: pytest.LogCaptureFixture
) -> None:
    engine.behaviour = Behaviour(deep=depth)
    status, raw = await post(gateway, key, STREAMED)
    assert status == 200
    data = stream_events(raw)
    assert data[-1] == b"[DONE]"
    error = orjson.loads(data[-2])["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "bad_gateway")
    delivered = [orjson.loads(event) for event in data[:-2]]
    assert len(delivered) == 2, "the chunks before the deep one"
    (record,) = await records(gateway)
    assert (record.status, record.estimated) == (502, True)
    assert record.completion_tokens > 0 and record.cost_nanos > 0
    assert not [r for r in caplog.records if r.exc_info], "no traceback: nothing unexpected"


# The channel key, however the upstream spells it


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    formatter = logging.Formatter()
    return [f"{formatter.format(record)} {record.__dict__}" for record in caplog.records]


@pytest.mark.parametrize("spelling", sorted(spellings(CHANNEL_KEY)))
async def test_a_refusal_spelling_the_channel_key_reaches_neither_caller_nor_log(
    gateway: Gateway,
    key: str,
    engine: FakeEngine,
    caplog: pytest.LogCaptureFixture,
    spelling: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    engine.behaviour = Behaviour(fail=400, leak=True, spelling=spelling)
    status, body = await post(gateway, key, CHAT)
    assert status == 400
    text = body.decode()
    assert not exposes(text, CHANNEL_KEY)
    error = orjson.loads(body)["error"]
    assert error["message"].startswith("Fake engine failure (status 400). The key you sent, ")
    assert "[redacted]" in error["message"]
    assert error["param"] is None

    engine.behaviour = Behaviour(error_after=2, leak=True, spelling=spelling)
    status, raw = await post(gateway, key, STREAMED)
    assert status == 200
    assert not exposes(raw.decode(), CHANNEL_KEY)
    error = orjson.loads(stream_events(raw)[-2])["error"]
    assert error["message"].startswith("The engine failed. The key you sent, ")
    assert "[redacted]" in error["message"]

    lines = logged(caplog)
    assert any("upstream call failed" in line for line in lines)
    assert not [line for line in lines if exposes(line, CHANNEL_KEY)]


CUT_UP = ["split", "split_thrice", "reversed", "reversed_split"]
DIALECTS = {
    "chat": ("/chat/completions", CHAT),
    "responses": ("/responses", {"model": "chat-large", "input": "hello"}),
    "messages": ("/messages", {"model": "chat-large", "max_tokens": 50, "messages": MESSAGES}),
}


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize("spelling", CUT_UP)
async def test_a_key_cut_up_or_reversed_reaches_no_dialects_caller(
    gateway: Gateway,
    key: str,
    engine: FakeEngine,
    caplog: pytest.LogCaptureFixture,
    spelling: str,
    dialect: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    path, body = DIALECTS[dialect]
    engine.behaviour = Behaviour(fail=400, leak=True, spelling=spelling)
    status, raw = await post(gateway, key, body, path)
    assert status == 400
    assert exposes(spellings(CHANNEL_KEY)[spelling], CHANNEL_KEY), "the upstream gave it away"
    assert not exposes(raw.decode(), CHANNEL_KEY)
    message = orjson.loads(raw)["error"]["message"]
    assert message.startswith("Fake engine failure (status 400). The key you sent, ")
    assert "[redacted]" in message
    assert not [line for line in logged(caplog) if exposes(line, CHANNEL_KEY)]
