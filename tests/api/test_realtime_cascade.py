"""A realtime voice built from parts (``models[].cascade``): Parley speaks the Realtime
protocol itself over real WebSockets, its parts answered by fake upstream HTTP servers
(a chat engine, a speech engine at 16 kHz, a transcriber), with the official SDK
(``client.realtime.connect``) as one caller and aiohttp's WebSocket client as another;
each part admitted and metered as its own call."""

from __future__ import annotations

import asyncio
import base64
import math
from array import array
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from pydantic import ValidationError

from parley.domain.pricing import usd_to_nanos
from parley.domain.realtime_sessions import session_of
from parley.domain.requests import RequestQuery, StatusFilter
from parley.settings import Settings
from tests.api.harness import (
    Config,
    Gateway,
    StartGateway,
    call,
    local_state,
    records,
    starting,
)
from tests.api.test_realtime import Socket
from tests.upstreams.openai_audio import SECONDS_PER_CHARACTER, FakeAudioEngine
from tests.upstreams.openai_compatible import FakeEngine
from tests.upstreams.transcribers import FakeTranscriber

VOICE = "voice"
TOOLS_VOICE = "voice-tools"
CHAT_PRICES = {"input_per_1k": "0.001", "output_per_1k": "0.002"}
SPEECH_PRICES = {"per_1k_characters": "0.015"}
STT_PRICES = {"per_minute": "0.006"}
ENGINE_RATE = 16_000
"""The fake speech engine's rate: the session hears it resampled to 24 kHz."""
RATE = 24_000
LOOKUP = {
    "type": "function",
    "name": "lookup",
    "description": "Look something up.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
}


def cascade_config(
    chat: FakeEngine, speech: FakeAudioEngine, ears: FakeTranscriber, workdir: Path
) -> Config:
    def cascade(name: str, brain: str) -> dict[str, Any]:
        parts = {"transcription": "ears", "chat": brain, "speech": "mouth", "voice": "ryan"}
        return {"name": name, "kind": "realtime", "cascade": parts}

    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "chat-engine",
                "type": "openai",
                "base_url": chat.base_url,
                "models": [
                    {"name": "brain", "upstream": "fake-model"},
                    {"name": "brain-tools", "upstream": "fake-model+tools"},
                ],
            },
            {
                "name": "speech-engine",
                "type": "openai-audio",
                "base_url": speech.base_url,
                "models": [{"name": "mouth", "upstream": "qwen3-tts"}],
            },
            {
                "name": "stt-engine",
                "type": "openai",
                "base_url": ears.base_url,
                "api_key": "sk-ears",
                "models": [{"name": "ears", "upstream": "whisper-1"}],
            },
        ],
        "models": [
            {"name": "brain", "kind": "chat", "prices": CHAT_PRICES},
            {"name": "brain-tools", "kind": "chat", "prices": CHAT_PRICES},
            {
                "name": "mouth",
                "kind": "speech",
                "prices": SPEECH_PRICES,
                "audio": {"sample_rate": ENGINE_RATE, "default_voice": "vivian"},
            },
            {
                "name": "ears",
                "kind": "transcription",
                "prices": STT_PRICES,
                "transcription": {"stream": False},
            },
            cascade(VOICE, "brain"),
            cascade(TOOLS_VOICE, "brain-tools"),
        ],
    }


@pytest.fixture
async def chat() -> AsyncIterator[FakeEngine]:
    async with FakeEngine() as engine:
        yield engine


@pytest.fixture
async def speech() -> AsyncIterator[FakeAudioEngine]:
    async with FakeAudioEngine(rate=ENGINE_RATE) as engine:
        yield engine


@pytest.fixture
async def ears() -> AsyncIterator[FakeTranscriber]:
    async with FakeTranscriber("openai", api_key="sk-ears") as engine:
        yield engine


@pytest.fixture
async def start(
    chat: FakeEngine, speech: FakeAudioEngine, ears: FakeTranscriber, tmp_path: Path
) -> AsyncIterator[StartGateway]:
    async with starting(lambda: cascade_config(chat, speech, ears, tmp_path)) as start_gateway:
        yield start_gateway


@pytest.fixture
async def gateway(start: StartGateway) -> Gateway:
    return await start()


async def connect(
    gateway: Gateway, key: str, http: aiohttp.ClientSession, model: str = VOICE
) -> Socket:
    url = f"ws://{gateway.base_url.removeprefix('http://')}/v1/realtime?model={model}"
    socket = await http.ws_connect(url, headers={"Authorization": f"Bearer {key}"})
    return Socket(socket)


def tone(seconds: float) -> str:
    """Base64 PCM16 at 24 kHz that the voice detector hears as speech (a loud tone)."""
    count = int(RATE * seconds)
    samples = array("h", (int(8000 * math.sin(i * 0.06)) for i in range(count)))
    return base64.b64encode(samples.tobytes()).decode()


def silence(seconds: float) -> str:
    return base64.b64encode(b"\0\0" * int(RATE * seconds)).decode()


def user_text(text: str) -> dict[str, Any]:
    return {
        "type": "conversation.item.create",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        },
    }


def spoken_bytes(text: str) -> int:
    """The bytes of 24 kHz PCM the fake engine's audio for ``text`` becomes."""
    seconds = max(0.4, len(text) * SECONDS_PER_CHARACTER)
    return int(ENGINE_RATE * seconds) * RATE // ENGINE_RATE * 2


def of(seen: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in seen if event["type"] == kind]


async def test_the_official_sdk_talks_to_a_cascade(
    gateway: Gateway, chat: FakeEngine, speech: FakeAudioEngine
) -> None:
    key = await gateway.key(await gateway.group("team"))
    client = gateway.client(key)
    async with client.realtime.connect(model=VOICE) as connection:
        created = await connection.recv()
        assert created.type == "session.created"
        assert created.session.model == VOICE
        assert gateway.services.live_sessions.by_model() == {VOICE: 1}
        await connection.session.update(session={"type": "realtime", "instructions": "Be brief."})
        assert (await connection.recv()).type == "session.updated"
        await connection.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hello there. How are you?"}],
            }
        )
        await connection.response.create()
        kinds: list[str] = []
        audio, transcript = b"", ""
        async for event in connection:
            kinds.append(event.type)
            if event.type == "response.output_audio.delta":
                audio += base64.b64decode(event.delta)
            if event.type == "response.output_audio_transcript.delta":
                transcript += event.delta
            if event.type == "response.done":
                done = event
                break
        session_id = created.session.id
    assert transcript == "echo: Hello there. How are you?"
    assert kinds.index("response.created") < kinds.index("response.output_audio.delta")
    assert "response.output_audio_transcript.done" in kinds
    assert kinds[-3:] == ["response.output_item.done", "conversation.item.done", "response.done"]
    assert done.response.status == "completed"
    assert done.response.usage.input_tokens > 0
    sentences = ["echo: Hello there.", "How are you?"]
    assert [r.body["input"] for r in speech.requests if r.body] == sentences
    assert speech.spoken == ["ryan", "ryan"]  # the cascade's voice
    assert len(audio) == sum(spoken_bytes(s) for s in sentences)  # resampled 16 → 24 kHz
    [asked] = chat.requests
    assert asked.body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert asked.body["model"] == "fake-model"
    found = sorted(await records(gateway), key=lambda r: r.request_id)
    assert [r.model for r in found] == ["brain", "mouth", "mouth"]
    assert {r.endpoint for r in found} == {"/v1/realtime"}
    assert all(session_of(r.request_id) == session_id for r in found)  # the log's filter
    assert all(r.status == 200 and r.cost_nanos > 0 for r in found)
    brain = found[0]
    assert (brain.prompt_tokens, brain.completion_tokens) == (
        done.response.usage.input_tokens,
        done.response.usage.output_tokens,
    )
    assert found[1].characters == len(sentences[0])
    assert found[1].cost_nanos == usd_to_nanos("0.015") * len(sentences[0]) // 1000


async def test_a_spoken_turn_is_detected_heard_answered_and_spoken(
    gateway: Gateway, ears: FakeTranscriber
) -> None:
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        created = await socket.until("session.created")
        detection = created["session"]["audio"]["input"]["turn_detection"]
        assert detection["type"] == "server_vad"
        for chunk in (silence(0.5), tone(1.5), silence(0.8)):
            await socket.send({"type": "input_audio_buffer.append", "audio": chunk})
        started = await socket.until("input_audio_buffer.speech_started")
        assert started["audio_start_ms"] == 500 - 300  # the prefix padding before it
        stopped = await socket.until("input_audio_buffer.speech_stopped")
        assert stopped["audio_end_ms"] == 2000
        committed = await socket.until("input_audio_buffer.committed")
        assert committed["item_id"] == started["item_id"] == stopped["item_id"]
        heard = await socket.until("conversation.item.input_audio_transcription.completed")
        said = "This is part 1. This is part 2. This is part 3."  # 2.3 s: 200 ms to 2500
        assert heard["transcript"] == said
        done = await socket.until("response.done", seconds=10)
    assert done["response"]["status"] == "completed"
    [message] = done["response"]["output"]
    assert message["content"][0]["transcript"] == f"echo: {said}"
    assert ears.last.fields["model"] == "whisper-1"
    found = await records(gateway)
    assert sorted(r.model for r in found) == ["brain", "ears", "mouth", "mouth", "mouth"]
    [heard_record] = [r for r in found if r.model == "ears"]
    assert heard_record.audio_ms == 3000  # every started second of the 2.3 s committed
    assert heard_record.cost_nanos == usd_to_nanos("0.006") * 3 // 60


async def test_a_manual_commit_is_heard_and_answered_when_asked(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        manual = {"audio": {"input": {"turn_detection": None}}}
        await socket.send({"type": "session.update", "session": manual})
        updated = await socket.until("session.updated")
        assert updated["session"]["audio"]["input"]["turn_detection"] is None
        await socket.send({"type": "input_audio_buffer.commit", "event_id": "c1"})
        empty = await socket.until("error")
        assert empty["error"]["code"] == "input_audio_buffer_commit_empty"
        assert empty["error"]["event_id"] == "c1"
        await socket.send({"type": "input_audio_buffer.append", "audio": tone(1.0)})
        await socket.send({"type": "input_audio_buffer.commit"})
        heard = await socket.until("conversation.item.input_audio_transcription.completed")
        assert heard["transcript"] == "This is part 1."
        await socket.send({"type": "response.create", "response": {"output_modalities": ["text"]}})
        done = await socket.until("response.done")
    assert not of(socket.seen, "input_audio_buffer.speech_started")
    assert of(socket.seen, "response.created")  # only when asked
    texts = "".join(e["delta"] for e in of(socket.seen, "response.output_text.delta"))
    assert texts == "echo: This is part 1."
    assert not of(socket.seen, "response.output_audio.delta")  # a text response
    assert done["response"]["output"][0]["content"][0] == {"type": "output_text", "text": texts}
    assert sorted(r.model for r in await records(gateway)) == ["brain", "ears"]


async def test_a_tool_call_round_trip(gateway: Gateway, chat: FakeEngine) -> None:
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http, TOOLS_VOICE)
        await socket.until("session.created")
        await socket.send({"type": "session.update", "session": {"tools": [LOOKUP]}})
        await socket.until("session.updated")
        await socket.send(user_text("weather in Paris"))
        await socket.until("conversation.item.done")
        await socket.send({"type": "response.create"})
        arguments = await socket.until("response.function_call_arguments.done")
        first = await socket.until("response.done")
        said, call = first["response"]["output"]  # the engine's text, then its call
        assert (said["type"], call["type"]) == ("message", "function_call")
        assert (arguments["name"], call["name"]) == ("lookup", "lookup")
        assert orjson.loads(arguments["arguments"]) == {"query": "echo: weather in Paris"}
        deltas = of(socket.seen, "response.function_call_arguments.delta")
        assert "".join(d["delta"] for d in deltas) == arguments["arguments"]
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "Sunny"}
        await socket.send({"type": "conversation.item.create", "item": output})
        await socket.until("conversation.item.done")
        await socket.send({"type": "response.create"})
        second = await socket.until("response.done")
    [message] = second["response"]["output"]
    assert message["content"][0]["transcript"] == "echo: weather in Paris"
    sent = chat.requests[-1].body
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {k: LOOKUP[k] for k in ("name", "description", "parameters")},
        }
    ]
    assert sent["messages"][-2]["content"] == "echo: weather in Paris"
    assert sent["messages"][-2]["tool_calls"][0]["id"] == call["call_id"]
    assert sent["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call["call_id"],
        "content": "Sunny",
    }


async def test_speech_during_a_response_cancels_it_and_truncates_the_item(
    gateway: Gateway, speech: FakeAudioEngine, chat: FakeEngine
) -> None:
    speech.delay = 0.3  # each sentence's audio comes in pieces, slowly
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send(user_text("One. Two. Three. Four. Five."))
        await socket.send({"type": "response.create"})
        await socket.until("response.output_audio.delta")
        await socket.until("response.output_audio.delta")  # within the first sentence
        await socket.send({"type": "input_audio_buffer.append", "audio": tone(0.2)})
        await socket.until("input_audio_buffer.speech_started")
        truncated = await socket.until("conversation.item.truncated")
        done = await socket.until("response.done")
        await socket.send({"type": "conversation.item.retrieve", "item_id": truncated["item_id"]})
        kept = await socket.until("conversation.item.retrieved")
    assert done["response"]["status"] == "cancelled"
    assert done["response"]["status_details"]["reason"] == "turn_detected"
    audio = sum(
        len(base64.b64decode(e["delta"])) for e in of(socket.seen, "response.output_audio.delta")
    )
    assert truncated["audio_end_ms"] == audio // 48
    assert audio < spoken_bytes("echo: One.")  # cut within the first sentence
    assert kept["item"]["content"][0]["transcript"] == ""  # nothing was said whole
    assert kept["item"]["status"] == "incomplete"
    found = await records(gateway)
    [cut] = [r for r in found if r.model == "mouth"]
    assert cut.status == 499
    assert cut.cost_nanos > 0  # billed: its audio reached the caller
    assert len([r for r in speech.requests if r.body]) == 1


async def test_a_refused_part_is_an_error_event_and_the_session_goes_on(
    gateway: Gateway, chat: FakeEngine
) -> None:
    key = await gateway.key(await gateway.group("poor", budget_nanos=1))
    text_only = {"type": "response.create", "response": {"output_modalities": ["text"]}}
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send(user_text("Hello."))
        await socket.send(text_only)  # admitted: nothing spent yet
        assert (await socket.until("response.done"))["response"]["status"] == "completed"
        await socket.send(text_only)
        error = await socket.until("error")
        done = await socket.until("response.done")
        await socket.send({"type": "session.update", "session": {"instructions": "Hi."}})
        await socket.until("session.updated")
    assert error["error"]["code"] == "insufficient_quota"
    assert done["response"]["status"] == "failed"
    assert done["response"]["status_details"]["error"]["code"] == "insufficient_quota"
    assert len(chat.requests) == 1
    [spent] = await records(gateway)
    assert spent.cost_nanos > 1
    query = RequestQuery(status=StatusFilter(400, 599))
    refused = [line.record for line in await gateway.services.store.list_requests(query)]
    assert [(r.endpoint, r.model, r.error_code) for r in refused] == [
        ("/v1/realtime", "brain", "insufficient_quota")
    ]


async def test_conversation_items_are_created_deleted_and_refused(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send(user_text("first"))
        added = await socket.until("conversation.item.added")
        await socket.send({"type": "conversation.item.delete", "item_id": added["item"]["id"]})
        deleted = await socket.until("conversation.item.deleted")
        assert deleted["item_id"] == added["item"]["id"]
        await socket.send({"type": "conversation.item.delete", "item_id": "nope"})
        assert (await socket.until("error"))["error"]["code"] == "item_not_found"
        await socket.send({"type": "response.cancel"})
        assert (await socket.until("error"))["error"]["code"] == "response_cancel_not_active"
        audio = {"output": {"format": {"type": "audio/pcmu"}}}
        await socket.send({"type": "session.update", "session": {"audio": audio}})
        bad = await socket.until("error")
        assert bad["error"]["param"] == "session.audio.output.format"
        await socket.send({"type": "nonsense"})
        assert (await socket.until("error"))["error"]["code"] == "unknown_event"
        await socket.send(user_text("still here"))
        assert (await socket.until("conversation.item.added"))["previous_item_id"] is None
        said = {"type": "input_audio", "audio": tone(1.0)}
        item = {"type": "message", "role": "user", "content": [said]}
        await socket.send({"type": "conversation.item.create", "item": item})
        heard = await socket.until("conversation.item.input_audio_transcription.completed")
        assert heard["transcript"] == "This is part 1."
        done = await socket.until("conversation.item.done")
        assert done["item"]["content"] == [{"type": "input_audio", "transcript": "This is part 1."}]
    assert not of(socket.seen, "response.created")  # an item is heard, not answered


def test_a_cascade_names_models_of_the_right_kinds() -> None:
    def settings(parts: dict[str, str], **more: Any) -> Settings:
        models = [
            {"name": "c", "kind": "chat"},
            {"name": "s", "kind": "speech"},
            {"name": "t", "kind": "transcription"},
            {"name": "v", "kind": "realtime", "cascade": parts},
        ]
        return Settings.model_validate({"models": models, **more})

    good = {"transcription": "t", "chat": "c", "speech": "s"}
    settings(good)  # no prices needed: each part is billed at its own
    with pytest.raises(ValidationError, match=r"cascade\.chat names unknown `x`"):
        settings({**good, "chat": "x"})
    with pytest.raises(ValidationError, match=r"cascade\.speech names `c`, of kind chat"):
        settings({**good, "speech": "c"})
    served = {"name": "x", "type": "openai", "base_url": "http://x/v1", "models": [{"name": "v"}]}
    with pytest.raises(ValidationError, match="no channel serves it"):
        settings(good, channels=[served])
    with pytest.raises(ValidationError, match="only for kind: realtime"):
        Settings.model_validate({"models": [{"name": "c", "kind": "chat", "cascade": good}]})


async def test_shutdown_ends_a_cascade_session_with_1012(
    gateway: Gateway, speech: FakeAudioEngine
) -> None:
    speech.delay = 0.3
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send(user_text("Hello."))
        await socket.send({"type": "response.create"})
        await socket.until("response.output_audio.delta")
        ending = asyncio.create_task(gateway.services.in_flight.end_all(wait_seconds=3))
        error = await socket.until("error")
        assert error["error"]["code"] == "service_unavailable"
        assert await socket.closed() == 1012
        assert await ending == 2  # the session, and the sentence being spoken
    found = {r.model: r for r in await records(gateway)}
    assert found["brain"].status == 200
    assert found["mouth"].status == 599
    assert found["mouth"].cost_nanos > 0  # its audio had reached the caller


async def test_a_revoked_key_ends_the_session_at_its_next_part(gateway: Gateway) -> None:
    group = await gateway.group("team")
    key = await gateway.key(group)
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        record = next(k for k in gateway.services.directory.cached_keys() if k.group_id == group.id)
        revoked = await gateway.services.store.revoke_key(record.id, datetime.now(UTC))
        gateway.services.directory.remember_key(revoked)
        await socket.send(user_text("Hello."))
        await socket.send({"type": "response.create"})
        assert (await socket.until("error"))["error"]["code"] == "invalid_api_key"
        assert await socket.closed() == 1008
    assert await records(gateway) == []


async def test_a_browser_opens_a_cascade_with_a_bound_secret(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    bound = {"type": "realtime", "model": VOICE, "instructions": "Be kind."}
    status, made = await call(
        gateway, "POST", "/v1/realtime/client_secrets", key, json={"session": bound}
    )
    assert status == 200, made
    url = f"ws://{gateway.base_url.removeprefix('http://')}/v1/realtime"
    protocols = ("realtime", f"openai-insecure-api-key.{made['value']}")
    async with aiohttp.ClientSession() as http:
        socket = Socket(await http.ws_connect(url, protocols=protocols))
        await socket.until("session.created")
        updated = await socket.until("session.updated")  # the secret's configuration
    assert updated["session"]["instructions"] == "Be kind."
    assert updated["session"]["model"] == VOICE


async def test_the_input_buffer_is_bounded(start: StartGateway) -> None:
    def small(config: Config) -> None:
        config["server"] = {"max_audio_bytes": RATE * 2 * 2}  # two seconds

    gateway = await start(small)
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send({"type": "input_audio_buffer.append", "audio": silence(30.0)})
        await socket.send({"type": "input_audio_buffer.append", "audio": silence(1.9)})
        for _ in range(3):  # a turn that does not end is committed at the bound
            await socket.send({"type": "input_audio_buffer.append", "audio": tone(1.0)})
        await socket.until("input_audio_buffer.speech_started")
        stopped = await socket.until("input_audio_buffer.speech_stopped")
        # 300 ms of prefix and a second of speech held: the next second would pass 2 s
        assert stopped["audio_end_ms"] == 31_900 + 1000
        await socket.until("input_audio_buffer.committed")
        manual = {"audio": {"input": {"turn_detection": None}}}
        await socket.send({"type": "session.update", "session": manual})
        await socket.until("session.updated")
        await socket.send({"type": "input_audio_buffer.append", "audio": tone(1.5)})
        await socket.send({"type": "input_audio_buffer.append", "audio": tone(1.0)})
        assert (await socket.until("error"))["error"]["code"] == "input_audio_buffer_too_large"


async def test_a_caller_truncates_what_it_did_not_play(gateway: Gateway, chat: FakeEngine) -> None:
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send(user_text("Hello there. How are you?"))
        await socket.send({"type": "response.create"})
        done = await socket.until("response.done")
        [item] = done["response"]["output"]
        first = spoken_bytes("echo: Hello there.") // 48  # the first sentence's audio, in ms
        whole = first + spoken_bytes("How are you?") // 48
        truncate = {"type": "conversation.item.truncate", "item_id": item["id"], "content_index": 0}
        await socket.send({**truncate, "audio_end_ms": whole + 1})
        assert (await socket.until("error"))["error"]["param"] == "audio_end_ms"
        await socket.send({**truncate, "audio_end_ms": first + 10})
        truncated = await socket.until("conversation.item.truncated")
        assert truncated["audio_end_ms"] == first + 10
        await socket.send({"type": "conversation.item.retrieve", "item_id": item["id"]})
        kept = await socket.until("conversation.item.retrieved")
        await socket.send(user_text("And then?"))
        await socket.send({"type": "response.create"})
        await socket.until("response.done")
    assert kept["item"]["content"][0]["transcript"] == "echo: Hello there."
    told = chat.requests[-1].body["messages"]
    assert told[-2] == {"role": "assistant", "content": "echo: Hello there."}


async def test_a_failed_sentence_fails_the_response_not_the_session(
    gateway: Gateway, speech: FakeAudioEngine
) -> None:
    speech.busy = 503
    key = await gateway.key(await gateway.group("team"))
    async with aiohttp.ClientSession() as http:
        socket = await connect(gateway, key, http)
        await socket.until("session.created")
        await socket.send(user_text("Hello there. How are you?"))
        await socket.send({"type": "response.create"})
        error = await socket.until("error")
        done = await socket.until("response.done")
        speech.busy = None
        await socket.send({"type": "response.create"})
        again = await socket.until("response.done")
    assert error["error"]["type"] == "upstream_error"
    assert done["response"]["status"] == "failed"
    assert done["response"]["status_details"]["error"]["type"] == "upstream_error"
    assert again["response"]["status"] == "completed"
    found = await records(gateway)
    failed = [r for r in found if r.model == "mouth" and r.status >= 500]
    assert failed and all(r.cost_nanos == 0 for r in failed)
    assert [r.status for r in found if r.model == "brain"][-1] == 200
