"""``GET /v1/realtime``: a realtime session relayed over real WebSockets to a fake OpenAI
Realtime server, with the official SDK (``client.realtime.connect``) as one caller and
aiohttp's WebSocket client as another; each turn admitted and metered on its own."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from parley.domain.pricing import usd_to_nanos
from parley.domain.requests import RequestQuery, StatusFilter
from parley.domain.voices import Clone
from parley.http.client import HttpClient
from parley.providers.base import ReplyBounds
from parley.providers.registry import ProviderRegistry
from parley.runtime.channel_probe import probe
from parley.settings import ChannelSettings, Settings
from tests.api.harness import (
    CHANNEL_KEY,
    Config,
    Gateway,
    StartGateway,
    call,
    local_state,
    records,
    starting,
)
from tests.upstreams.realtime import PCM_RATE, FakeRealtime

NOW = datetime.now(UTC)
ADMIN_TOKEN = "admin-token-for-realtime-tests-0123456789"
MODEL = "voice-rt"
UPSTREAM_MODEL = "gpt-realtime"
OTHER_MODEL = "voice-rt-mini"
PRICES = {
    "input_per_1k": "0.004",
    "output_per_1k": "0.016",
    "audio_input_per_1k": "0.032",
    "cached_audio_input_per_1k": "0.0004",
    "cached_input_per_1k": "0.0004",
    "audio_output_per_1k": "0.064",
}


def realtime_config(upstream: FakeRealtime, workdir: Path) -> Config:
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "openai-rt",
                "type": "openai",
                "base_url": upstream.base_url,
                "api_key": CHANNEL_KEY,
                "models": [
                    {"name": MODEL, "upstream": UPSTREAM_MODEL},
                    {"name": OTHER_MODEL, "upstream": UPSTREAM_MODEL},
                ],
                "timeouts": {"connect": 2, "read": 5},
            }
        ],
        "models": [
            {"name": MODEL, "kind": "realtime", "prices": PRICES},
            {"name": OTHER_MODEL, "kind": "realtime", "prices": PRICES},
        ],
    }


@pytest.fixture
async def upstream() -> AsyncIterator[FakeRealtime]:
    async with FakeRealtime(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def start(upstream: FakeRealtime, tmp_path: Path) -> AsyncIterator[StartGateway]:
    async with starting(lambda: realtime_config(upstream, tmp_path)) as start_gateway:
        yield start_gateway


@pytest.fixture
async def gateway(start: StartGateway) -> Gateway:
    return await start()


def ws_url(gateway: Gateway, model: str = MODEL) -> str:
    return f"ws://{gateway.base_url.removeprefix('http://')}/v1/realtime?model={model}"


class Socket:
    """A raw WebSocket caller: sends events, reads them until one of a type."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket
        self.seen: list[dict[str, Any]] = []

    async def send(self, event: dict[str, Any] | str) -> None:
        await self.socket.send_str(
            event if isinstance(event, str) else orjson.dumps(event).decode()
        )

    async def until(self, kind: str, seconds: float = 5) -> dict[str, Any]:
        async with asyncio.timeout(seconds):
            while True:
                message = await self.socket.receive()
                if message.type != aiohttp.WSMsgType.TEXT:
                    raise AssertionError(f"socket ended ({message.type}, {self.socket.close_code})")
                event = _parsed(message.data)
                self.seen.append(event)
                if event["type"] == kind:
                    return event

    async def closed(self, seconds: float = 5) -> int | None:
        """Read to the end; the close code."""
        async with asyncio.timeout(seconds):
            while True:
                message = await self.socket.receive()
                if message.type == aiohttp.WSMsgType.TEXT:
                    self.seen.append(_parsed(message.data))
                    continue
                return self.socket.close_code


def _parsed(frame: str) -> dict[str, Any]:
    """An event as JSON; a frame relayed as it came that is no event, under ``raw``."""
    try:
        event = orjson.loads(frame)
    except orjson.JSONDecodeError:
        event = None
    return event if isinstance(event, dict) and "type" in event else {"type": "", "raw": frame}


async def connect(
    gateway: Gateway, key: str, session: aiohttp.ClientSession, **options: Any
) -> Socket:
    socket = await session.ws_connect(
        ws_url(gateway), headers={"Authorization": f"Bearer {key}"}, **options
    )
    return Socket(socket)


def expected_cost(usage: dict[str, Any]) -> int:
    """The turn's cost at ``PRICES``, each part at its own price, in nano-dollars."""
    given = usage["input_token_details"]
    cached = given["cached_tokens"]
    cached_audio = given["cached_tokens_details"]["audio_tokens"]
    audio_in = given["audio_tokens"] - cached_audio
    text_in = usage["input_tokens"] - given["audio_tokens"] - (cached - cached_audio)
    out = usage["output_token_details"]
    parts = (
        (text_in, "input_per_1k"),
        (cached - cached_audio, "cached_input_per_1k"),
        (audio_in, "audio_input_per_1k"),
        (cached_audio, "cached_audio_input_per_1k"),
        (out["text_tokens"], "output_per_1k"),
        (out["audio_tokens"], "audio_output_per_1k"),
    )
    return sum(count * usd_to_nanos(PRICES[price]) for count, price in parts) // 1000


def speech(seconds: float) -> str:
    """Base64 PCM16 that the fake's voice detection hears as speech."""
    return base64.b64encode(b"\x10\x20" * int(PCM_RATE * seconds / 2)).decode()


def silence(seconds: float) -> str:
    return base64.b64encode(b"\0\0" * int(PCM_RATE * seconds / 2)).decode()


async def test_the_official_sdk_talks_to_a_relayed_model(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    key = await gateway.key(await gateway.group("team"))
    client = gateway.client(key)
    async with client.realtime.connect(model=MODEL) as connection:
        created = await connection.recv()
        assert created.type == "session.created"
        assert created.session.model == MODEL  # the public name, not the upstream's
        await connection.session.update(
            session={
                "type": "realtime",
                "model": "someone-elses-model",
                "instructions": "Be brief.",
            }
        )
        updated = await connection.recv()
        assert updated.type == "session.updated"
        await connection.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Say hello, please."}],
            }
        )
        await connection.response.create()
        kinds: list[str] = []
        audio = b""
        async for event in connection:
            kinds.append(event.type)
            if event.type == "response.output_audio.delta":
                audio += base64.b64decode(event.delta)
            if event.type == "response.done":
                done = event
                break
    assert "response.created" in kinds
    assert kinds.count("response.output_audio.delta") == 3
    assert "response.output_audio_transcript.done" in kinds
    assert len(audio) == 3 * 4800
    assert done.response.usage is not None
    opened = upstream.connections[0]
    assert opened.query == {"model": UPSTREAM_MODEL}
    assert opened.headers["Authorization"] == f"Bearer {CHANNEL_KEY}"
    assert key not in str(opened.headers)
    assert opened.of_type("session.update")[0]["session"]["model"] == UPSTREAM_MODEL
    [record] = await records(gateway)
    usage = done.response.usage.model_dump()
    assert record.model == MODEL
    assert record.endpoint == "/v1/realtime"
    assert record.status == 200
    assert record.channel == "openai-rt"
    assert (record.prompt_tokens, record.completion_tokens) == (
        usage["input_tokens"],
        usage["output_tokens"],
    )
    assert not record.estimated
    assert record.cost_nanos == expected_cost(usage) > 0


async def test_open_sessions_are_counted_in_metrics(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    gauge = f'parley_realtime_sessions{{model="{MODEL}"}}'
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        async with http.get(f"{gateway.base_url}/metrics") as scraped:
            assert f"{gauge} 1.0" in await scraped.text()
        await socket.socket.close()
        await asyncio.sleep(0.2)
        async with http.get(f"{gateway.base_url}/metrics") as scraped:
            assert f"{gauge} 0.0" in await scraped.text()


async def test_a_session_offered_compression_goes_on_uncompressed(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http, compress=15)  # permessage-deflate offered
        created = await socket.until("session.created")
        assert socket.socket.compress == 0  # the upgrade did not take it
        assert created["session"]["model"] == MODEL
        await socket.socket.close()


async def test_each_turn_is_one_record_at_its_own_prices(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    upstream.behaviour.cached_tokens = 4
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send(
            {
                "type": "session.update",
                "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}},
            }
        )
        await socket.until("session.updated")
        usages = []
        for _ in range(2):
            await socket.send({"type": "input_audio_buffer.append", "audio": speech(1.0)})
            await socket.send({"type": "input_audio_buffer.commit"})
            await socket.send({"type": "response.create"})
            usages.append((await socket.until("response.done"))["response"]["usage"])
        await socket.socket.close()
    found = sorted(await records(gateway), key=lambda record: record.prompt_tokens)
    assert len(found) == 2
    assert usages[1]["input_token_details"]["cached_tokens_details"]["audio_tokens"] == 4
    for record, usage in zip(found, usages, strict=True):
        assert record.prompt_tokens == usage["input_tokens"]
        assert record.cached_tokens == usage["input_token_details"]["cached_tokens"]
        assert record.cost_nanos == expected_cost(usage)
    # audio is dearer than text: a second of input audio costs more than its count at text price
    text_price = usage["input_tokens"] * usd_to_nanos(PRICES["input_per_1k"]) // 1000
    assert found[1].cost_nanos > text_price


async def test_a_sessions_lines_carry_its_id_and_the_request_log_finds_them(
    start: StartGateway,
) -> None:
    gateway = await start(lambda config: config.update(admin={"token": ADMIN_TOKEN}))
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        ids = []
        for turns in (2, 1):
            socket = await connect(gateway, key, http)
            await socket.until("session.created")
            (live,) = gateway.services.live_sessions.sessions()
            ids.append(live.id)
            for _ in range(turns):
                await socket.send({"type": "response.create"})
                await socket.until("response.done")
            assert live.turns == turns
            await socket.socket.close()
            await asyncio.sleep(0.1)
        await gateway.flush_usage()
        first, second = ids
        status, found = await call(gateway, "GET", f"/admin/requests?session={first}", ADMIN_TOKEN)
        assert status == 200
        assert [line["session_id"] for line in found["data"]] == [first, first]
        assert {line["request_id"].rsplit("_", 1)[0] for line in found["data"]} == {first}
        status, other = await call(gateway, "GET", f"/admin/requests?session={second}", ADMIN_TOKEN)
        assert [line["session_id"] for line in other["data"]] == [second]
        for wrong in ("rtsess_nothex", f"{first}&batch=true"):
            status, refused = await call(
                gateway, "GET", f"/admin/requests?session={wrong}", ADMIN_TOKEN
            )
            assert status == 400 and refused["error"]["param"] == "session"


async def test_a_turn_without_an_output_limit_is_billed_whole(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    upstream.behaviour.chunk_bytes = 48_000 * 100  # 100 s of audio a delta: 2,000 tokens
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http, max_msg_size=0)
        await socket.until("session.created")
        await socket.send({"type": "response.create", "response": {"max_output_tokens": "inf"}})
        done = await socket.until("response.done", seconds=30)
        await socket.send({"type": "response.create", "response": {"max_output_tokens": 1000}})
        capped = await socket.until("response.done", seconds=30)
    found = sorted(await records(gateway), key=lambda record: record.created_at)
    usage = done["response"]["usage"]
    assert usage["output_tokens"] > 4096  # past the default hold: billed, not cut there
    assert (found[0].completion_tokens, found[0].estimated) == (usage["output_tokens"], False)
    assert capped["response"]["status"] == "incomplete"
    assert capped["response"]["usage"]["output_tokens"] > 1000
    # a report past the turn's own limit is not believed: billed at the limit, estimated
    assert (found[1].completion_tokens, found[1].estimated) == (1000, True)


async def test_bad_events_are_answered_and_the_session_goes_on(
    start: StartGateway, upstream: FakeRealtime
) -> None:
    def small(config: Config) -> None:
        config["realtime"] = {"max_audio_chunk_bytes": 2048, "max_event_bytes": 65536}

    gateway = await start(small)
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send("{not json")
        error = await socket.until("error")
        assert error["error"]["code"] == "invalid_json"
        await socket.send({"type": "response.make", "event_id": "evt_1"})
        error = await socket.until("error")
        assert error["error"]["code"] == "unknown_event"
        assert error["error"]["event_id"] == "evt_1"
        assert "response.make" in error["error"]["message"]
        await socket.send({"type": "input_audio_buffer.append", "audio": silence(0.02)})
        await socket.send(
            {"type": "input_audio_buffer.append", "audio": speech(0.5), "event_id": "big"}
        )
        error = await socket.until("error")
        assert (error["error"]["code"], error["error"]["event_id"]) == (
            "audio_chunk_too_large",
            "big",
        )
        await socket.send({"type": "response.create", "response": {"max_output_tokens": "lots"}})
        assert (await socket.until("error"))["error"]["param"] == "response.max_output_tokens"
        await socket.send({"type": "response.create"})
        await socket.until("response.done")  # the session survived all of it
        await socket.send({"type": "conversation.item.create", "item": {"x": "y" * 70000}})
        assert await socket.closed() == 1009
    sent = [event["type"] for event in upstream.connections[0].events]
    assert "response.make" not in sent
    assert sent.count("input_audio_buffer.append") == 1
    assert sent.count("response.create") == 1


async def test_only_the_upstreams_voices_and_the_groups_own_are_sent_on(
    start: StartGateway, upstream: FakeRealtime
) -> None:
    def speech_model(config: Config) -> None:
        config["models"].append({"name": "tts", "kind": "speech"})

    gateway = await start(speech_model)
    team, other = await gateway.group("team"), await gateway.group("other")
    clone = Clone(other.id, "tts", "bob", f"g{other.id}__bob", "voice_abc123", "x", 3000, NOW)
    await gateway.services.clones.add(clone)
    key = await gateway.key(team)
    refused = (
        f"g{other.id}__bob",  # a clone id: a speech model's, never a realtime session's
        f"g{team.id}__mine",
        "voice_abc123",  # another group's clone, by the engine's own id for it
    )
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        for voice in refused:
            output = {"voice": {"id": voice}}
            await socket.send({"type": "session.update", "session": {"audio": {"output": output}}})
            error = await socket.until("error")
            assert error["error"]["code"] == "voice_not_found"
        await socket.send({"type": "response.create", "response": {"voice": "voice_abc123"}})
        assert (await socket.until("error"))["error"]["code"] == "voice_not_found"
        output = {"voice": "marin"}
        await socket.send({"type": "session.update", "session": {"audio": {"output": output}}})
        await socket.until("session.updated")
    sent = upstream.connections[0].events
    assert [event["type"] for event in sent] == ["session.update"]
    owner = await gateway.key(other)
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, owner, http)
        await socket.until("session.created")
        output = {"voice": {"id": "voice_abc123"}}
        await socket.send({"type": "session.update", "session": {"audio": {"output": output}}})
        await socket.until("session.updated")  # its own clone's engine id: sent on


def transcriber(config: Config) -> None:
    """A transcription model served by the realtime channel, priced per minute."""
    config["channels"][0]["models"].append({"name": "stt", "upstream": "gpt-4o-transcribe"})
    config["models"].append({"name": "stt", "kind": "transcription", "prices": STT_PRICES})


STT_PRICES = {"per_minute": "0.006"}
TRANSCRIBE = {
    "type": "session.update",
    "session": {
        "type": "realtime",
        "audio": {"input": {"transcription": {"model": "stt"}, "turn_detection": None}},
    },
}


async def test_input_transcription_is_billed_at_the_transcription_models_price(
    start: StartGateway, upstream: FakeRealtime
) -> None:
    gateway = await start(transcriber)
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        unknown = orjson.loads(orjson.dumps(TRANSCRIBE))
        unknown["session"]["audio"]["input"]["transcription"]["model"] = "whisper-1"
        await socket.send(unknown)
        error = await socket.until("error")
        assert error["error"]["code"] == "model_not_found"
        assert error["error"]["param"] == "session.audio.input.transcription.model"
        await socket.send(TRANSCRIBE)
        await socket.until("session.updated")
        await socket.send({"type": "input_audio_buffer.append", "audio": speech(2.0)})
        await socket.send({"type": "input_audio_buffer.commit"})
        done = await socket.until("conversation.item.input_audio_transcription.completed")
    [sent] = upstream.connections[0].of_type("session.update")
    assert sent["session"]["audio"]["input"]["transcription"]["model"] == "gpt-4o-transcribe"
    [record] = await records(gateway)
    assert record.model == "stt"
    assert record.audio_ms == 2000
    assert record.prompt_tokens == done["usage"]["input_tokens"] == 20
    assert record.cost_nanos == usd_to_nanos(STT_PRICES["per_minute"]) * 2 // 60


async def test_a_transcription_only_session_is_checked_against_the_budget(
    start: StartGateway, upstream: FakeRealtime
) -> None:
    gateway = await start(transcriber)
    key = await gateway.key(await gateway.group("poor", budget_nanos=1))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send(TRANSCRIBE)
        await socket.until("session.updated")
        await socket.send({"type": "input_audio_buffer.append", "audio": speech(1.0)})
        await socket.send({"type": "input_audio_buffer.commit"})
        await socket.until("conversation.item.input_audio_transcription.completed")
        for _ in range(6):  # the limits are checked once per five seconds of audio
            await socket.send({"type": "input_audio_buffer.append", "audio": speech(1.0)})
        assert (await socket.until("error"))["error"]["code"] == "insufficient_quota"
    appended = upstream.connections[0].of_type("input_audio_buffer.append")
    assert len(appended) < 7


async def test_refusals_before_the_upgrade_are_envelopes(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        for url, headers, status in (
            (
                ws_url(gateway),
                {"Authorization": "Bearer sk-wrong-0123456789abcdef"},
                401,
            ),
            (ws_url(gateway, "nope"), {"Authorization": f"Bearer {key}"}, 404),
        ):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(url, headers=headers)
            assert refused.value.status == status
        reply = await http.get(
            ws_url(gateway).replace("ws://", "http://"), headers={"Authorization": f"Bearer {key}"}
        )
        assert reply.status == 400
        assert (await reply.json())["error"]["code"] == "websocket_required"
    client = gateway.client(key)
    with pytest.raises(Exception, match="404"):
        async with client.realtime.connect(model="nope") as connection:
            await connection.recv()


async def test_a_model_the_group_may_not_use_is_unknown(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("narrow", models=["other"]))
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await connect(gateway, key, http)
    assert refused.value.status == 404


async def test_turns_count_against_rpm_and_a_refusal_keeps_the_session(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    key = await gateway.key(await gateway.group("slow", rpm=1))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send({"type": "response.create"})
        limits = await socket.until("rate_limits.updated")
        assert limits["rate_limits"][0]["name"] == "requests"
        assert limits["rate_limits"][0]["limit"] == 1  # the group's, not the upstream's 5000
        await socket.until("response.done")
        await socket.send({"type": "response.create", "event_id": "second"})
        error = await socket.until("error")
        assert error["error"]["code"] == "rate_limit_exceeded"
        assert error["error"]["event_id"] == "second"
        await socket.send(
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "still here"}],
                },
            }
        )
        await socket.until("conversation.item.done")
    assert len(upstream.connections[0].of_type("response.create")) == 1
    assert len(await records(gateway)) == 1
    query = RequestQuery(status=StatusFilter(400, 599))
    refused = [line.record for line in await gateway.services.store.list_requests(query)]
    assert [(r.status, r.error_code, r.endpoint, r.model) for r in refused] == [
        (429, "rate_limit_exceeded", "/v1/realtime", MODEL)
    ]


async def test_a_spent_budget_refuses_the_turn(gateway: Gateway, upstream: FakeRealtime) -> None:
    key = await gateway.key(await gateway.group("poor", budget_nanos=1000))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send({"type": "response.create"})  # admitted: nothing spent yet
        await socket.until("response.done")
        await socket.send({"type": "response.create"})
        error = await socket.until("error")
        assert error["error"]["code"] == "insufficient_quota"
        await socket.send({"type": "input_audio_buffer.clear"})
        await socket.until("input_audio_buffer.cleared")
    assert len(upstream.connections[0].of_type("response.create")) == 1
    [record] = await records(gateway)
    assert record.cost_nanos > 1000


async def test_a_response_the_upstream_begins_is_admitted_and_metered(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send({"type": "input_audio_buffer.append", "audio": speech(1.0)})
        await socket.until("input_audio_buffer.speech_started")
        await socket.send({"type": "input_audio_buffer.append", "audio": silence(0.5)})
        done = await socket.until("response.done")
    [record] = await records(gateway)
    assert record.prompt_tokens == done["response"]["usage"]["input_tokens"] == 15  # 1.5 s
    assert record.cost_nanos == expected_cost(done["response"]["usage"])


async def test_a_refused_upstream_begun_response_is_cancelled(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    upstream.behaviour.delay = 0.05
    upstream.behaviour.audio_chunks = 20
    key = await gateway.key(await gateway.group("slow", rpm=1))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send({"type": "response.create"})
        await socket.until("response.done")
        await socket.send({"type": "input_audio_buffer.append", "audio": speech(0.5)})
        await socket.send({"type": "input_audio_buffer.append", "audio": silence(0.2)})
        assert (await socket.until("error"))["error"]["code"] == "rate_limit_exceeded"
        done = await socket.until("response.done")
    assert done["response"]["status"] == "cancelled"
    assert len(upstream.connections[0].of_type("response.cancel")) == 1
    assert len(await records(gateway)) == 2  # what the upstream delivered is still metered


async def test_a_hostile_upstream_neither_breaks_the_session_nor_its_bill(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    upstream.behaviour.usage = {"input_tokens": "lots", "output_tokens": -5}
    upstream.behaviour.prelude = [
        "not json",
        "[1, 2]",
        {"type": "response.output_audio.delta", "response_id": [1], "delta": "AAAA"},
        {"type": "response.done", "response": {"id": {"x": 1}}},
        {"type": "error", "error": "nope"},
        {"type": "session.updated", "session": {"audio": {"output": {"format": 7}}}},
    ]
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send({"type": "response.create"})
        await socket.until("response.done")
        await socket.send({"type": "input_audio_buffer.clear"})
        await socket.until("input_audio_buffer.cleared")  # the session goes on
    [record] = await records(gateway)
    assert record.estimated  # the report was no count: what was delivered is billed
    assert record.completion_tokens == 3 * 2 + 5  # 0.3 s of audio; "Hello there, how ", 17 chars
    assert record.cost_nanos > 0


async def test_a_session_cut_midway_bills_what_was_delivered(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    upstream.behaviour.close_after_deltas = 2
    upstream.behaviour.chunk_bytes = 48_000  # a second of audio a delta
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send({"type": "response.create"})
        assert await socket.closed() == 1011
    [record] = await records(gateway)
    assert record.estimated
    assert record.status == 502
    # two seconds of audio, and "Hello there, " at four characters a token
    assert record.completion_tokens == 2 * 20 + 4
    assert record.cost_nanos > 0


async def test_a_caller_who_leaves_midway_is_billed_for_what_was_delivered(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    upstream.behaviour.delay = 0.1
    upstream.behaviour.audio_chunks = 50
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send({"type": "response.create"})
        await socket.until("response.output_audio.delta")
        await socket.socket.close()
    await asyncio.sleep(0.3)
    [record] = await records(gateway)
    assert record.status == 499
    assert record.estimated
    assert 0 < record.completion_tokens < 50


async def test_shutdown_ends_sessions_with_1012_and_writes_usage(
    gateway: Gateway, upstream: FakeRealtime
) -> None:
    upstream.behaviour.delay = 0.1
    upstream.behaviour.audio_chunks = 50
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send({"type": "response.create"})
        await socket.until("response.output_audio.delta")
        # as serve does at the end of the grace; the caller reads meanwhile (its close
        # reply is what the gateway waits for)
        ending = asyncio.create_task(gateway.services.in_flight.end_all(wait_seconds=3))
        error = await socket.until("error")
        assert error["error"]["code"] == "service_unavailable"
        assert await socket.closed() == 1012
        assert await ending == 1
    [record] = await records(gateway)
    assert record.status == 599
    assert record.estimated and record.cost_nanos > 0


async def test_an_idle_session_is_closed(start: StartGateway) -> None:
    def quick(config: Config) -> None:
        config["realtime"] = {"idle_seconds": 0.3}

    gateway = await start(quick)
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        assert (await socket.until("error"))["error"]["code"] == "session_idle"
        assert await socket.closed() == 1000


async def test_a_session_has_a_longest_life(start: StartGateway) -> None:
    def short(config: Config) -> None:
        config["realtime"] = {"max_session_seconds": 0.5}

    gateway = await start(short)
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        assert await socket.closed() == 1001


async def test_a_caller_that_stops_reading_is_closed_not_buffered(
    start: StartGateway, upstream: FakeRealtime
) -> None:
    def impatient(config: Config) -> None:
        config["realtime"] = {"send_timeout_seconds": 0.5}

    upstream.behaviour.chunk_bytes = 480_000
    upstream.behaviour.audio_chunks = 200
    gateway = await start(impatient)
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http, max_msg_size=0)
        await socket.until("session.created")
        await socket.send({"type": "response.create"})
        await asyncio.sleep(3)  # read nothing while the upstream streams 190 MB of audio
        assert await socket.closed(seconds=20) == 1008
    [record] = await records(gateway)
    assert record.estimated
    assert record.completion_tokens < 200 * 200


async def test_a_caller_that_reads_slowly_but_steadily_is_never_closed(
    start: StartGateway, upstream: FakeRealtime
) -> None:
    """Many sends that each wait a little, for longer than the send bound in all: the
    bound is each send's own, so the turn goes through whole."""

    def impatient(config: Config) -> None:
        config["realtime"] = {"send_timeout_seconds": 0.5}

    upstream.behaviour.chunk_bytes = 480_000
    upstream.behaviour.audio_chunks = 40
    gateway = await start(impatient)
    key = await gateway.key(await gateway.group("team"))
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http, max_msg_size=0)
        await socket.until("session.created")
        await socket.send({"type": "response.create"})
        began = loop.time()
        deltas = 0
        async with asyncio.timeout(60):
            while True:
                message = await socket.socket.receive()
                assert message.type == aiohttp.WSMsgType.TEXT, socket.socket.close_code
                kind = orjson.loads(message.data)["type"]
                if kind == "response.done":
                    break
                deltas += kind == "response.output_audio.delta"
                await asyncio.sleep(0.05)  # a reader slower than the upstream
        assert loop.time() - began > 4 * 0.5
    assert deltas == 40
    [record] = await records(gateway)
    assert (record.status, record.estimated) == (200, False)


async def test_an_azure_deployment_serves_realtime(upstream: FakeRealtime, tmp_path: Path) -> None:
    def azure() -> Config:
        config = realtime_config(upstream, tmp_path)
        channel = config["channels"][0]
        channel.update(
            type="azure-openai",
            base_url=upstream.endpoint,
            azure={"api_version": "2025-04-01-preview"},
        )
        return config

    async with starting(azure) as start_gateway:
        gateway = await start_gateway()
        key = await gateway.key(await gateway.group("team"))
        async with aiohttp.ClientSession() as http:
            socket = await connect(gateway, key, http)
            assert (await socket.until("session.created"))["session"]["model"] == MODEL
    opened = upstream.connections[0]
    assert opened.path == "/openai/realtime"
    assert opened.query == {"api-version": "2025-04-01-preview", "deployment": UPSTREAM_MODEL}
    assert opened.headers["api-key"] == CHANNEL_KEY


async def test_an_upstream_that_refuses_is_a_502(upstream: FakeRealtime, tmp_path: Path) -> None:
    def wrong_key() -> Config:
        config = realtime_config(upstream, tmp_path)
        config["channels"][0]["api_key"] = "sk-not-the-channel-key-0123"
        return config

    async with starting(wrong_key) as start_gateway:
        gateway = await start_gateway()
        key = await gateway.key(await gateway.group("team"))
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await connect(gateway, key, http)
    assert refused.value.status == 502


@pytest.mark.parametrize(
    "prices",
    [{}, {"input_per_1k": "0.004", "output_per_1k": "0.016"}, {"audio_input_per_1k": "0.03"}],
)
def test_a_realtime_model_without_its_prices_is_refused(prices: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="realtime model must state its prices"):
        Settings.model_validate({"models": [{"name": "rt", "kind": "realtime", "prices": prices}]})


def test_audio_prices_belong_to_realtime_models() -> None:
    with pytest.raises(ValueError, match="only for kind: realtime"):
        Settings.model_validate(
            {"models": [{"name": "c", "kind": "chat", "prices": {"audio_input_per_1k": "1"}}]}
        )


@pytest.mark.parametrize("azure", [False, True])
async def test_a_channel_test_opens_a_session_and_bills_nothing(
    upstream: FakeRealtime, azure: bool
) -> None:
    body: dict[str, Any] = {
        "name": "rt",
        "type": "openai",
        "base_url": upstream.base_url,
        "api_key": CHANNEL_KEY,
        "models": [{"name": MODEL, "upstream": UPSTREAM_MODEL}],
    }
    if azure:
        body.update(
            type="azure-openai", base_url=upstream.endpoint, azure={"api_version": "2025-04-01"}
        )
    channel = ChannelSettings.model_validate(body)
    providers = ProviderRegistry.default(HttpClient(), ReplyBounds(), 4096, ())
    result = await probe(providers, channel, channel.models[0], "realtime")
    assert (result.ok, result.status) == (True, 200), result
    assert upstream.connections[0].events == []  # no response asked for: nothing billed
    assert upstream.connections[0].path == ("/openai/realtime" if azure else "/v1/realtime")
    wrong = ChannelSettings.model_validate({**body, "api_key": "sk-wrong-key-0123456789"})
    result = await probe(providers, wrong, wrong.models[0], "realtime")
    assert (result.ok, result.status) == (False, 401)
