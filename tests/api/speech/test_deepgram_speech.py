"""Text to speech through Parley on a Deepgram channel (Aura), with the official SDK.

``tts-aura`` is served by the fake Deepgram (``tests/upstreams/deepgram.py``), its
upstream model ``aura-2-thalia-en`` (also its default voice), at 16 kHz for ``wav`` and
``pcm`` (the channel's ``deepgram.sample_rate``). Voices are Aura's models; it cannot
clone. Billing is per input character, as on every speech model.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import av
import openai
import pytest

from tests.api.harness import Gateway, local_state, records, starting
from tests.api.speech.test_speech import sse_events
from tests.clips import clip
from tests.upstreams.deepgram import SECONDS_PER_CHARACTER, FakeDeepgram

KEY = "dg0123456789abcdef0123456789abcdef01234567"
TEXT = "Hello from the speech gateway."  # 30 characters: 0.6 s of audio at the fake
PRICE_PER_1K_CHARACTERS = "0.015"
NANOS_PER_CHARACTER = 15_000  # $0.015 per 1,000 characters
RATE = 16000


@pytest.fixture
async def deepgram() -> AsyncIterator[FakeDeepgram]:
    async with FakeDeepgram(api_key=KEY) as running:
        yield running


def aura_config(deepgram: FakeDeepgram, workdir: Path) -> dict[str, Any]:
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "aura",
                "type": "deepgram",
                "base_url": deepgram.base_url,
                "api_key": KEY,
                "deepgram": {"sample_rate": RATE},
                "timeouts": {"connect": 2, "read": 10},
                "models": [{"name": "tts-aura", "upstream": "aura-2-thalia-en"}],
            }
        ],
        "models": [
            {
                "name": "tts-aura",
                "kind": "speech",
                "prices": {"per_1k_characters": PRICE_PER_1K_CHARACTERS},
                "audio": {
                    "default_voice": "aura-2-thalia-en",
                    "max_input_chars": 2000,
                    "sample_rate": RATE,
                },
            }
        ],
    }


@pytest.fixture
async def gateway(deepgram: FakeDeepgram, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with starting(lambda: aura_config(deepgram, tmp_path)) as start:
        yield await start()


@pytest.fixture
async def key(gateway: Gateway) -> str:
    return await gateway.key(await gateway.group("speakers"))


def seconds_of(data: bytes) -> float:
    with av.open(io.BytesIO(data)) as container:
        return sum(frame.samples / frame.sample_rate for frame in container.decode(audio=0))


async def get(gateway: Gateway, key: str, path: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{gateway.v1}{path}", headers={"Authorization": f"Bearer {key}"}) as reply,
    ):
        return reply.status, await reply.json()


async def test_the_sdk_gets_mp3_in_the_voice_asked_billed_per_character(
    gateway: Gateway, key: str, deepgram: FakeDeepgram
) -> None:
    client = gateway.client(key)
    reply = await client.audio.speech.create(
        model="tts-aura", input=TEXT, voice="aura-2-apollo-en", response_format="mp3"
    )
    assert reply.response.headers["content-type"] == "audio/mpeg"
    assert seconds_of(reply.content) == pytest.approx(len(TEXT) * SECONDS_PER_CHARACTER, abs=0.08)
    sent = deepgram.speeches[-1]
    assert sent.headers["Authorization"] == f"Token {KEY}"
    assert sent.body == {"text": TEXT}
    assert (sent.query["model"], sent.query["encoding"]) == ("aura-2-apollo-en", "mp3")
    (record,) = await records(gateway)
    assert (record.status, record.characters) == (200, len(TEXT))
    assert record.cost_nanos == len(TEXT) * NANOS_PER_CHARACTER


async def test_wav_by_default_and_pcm_at_the_channels_rate(
    gateway: Gateway, key: str, deepgram: FakeDeepgram
) -> None:
    client = gateway.client(key)
    wav = await client.audio.speech.create(model="tts-aura", input=TEXT, voice="aura-2-thalia-en")
    assert wav.response.headers["content-type"] == "audio/wav"
    assert wav.response.headers["x-sample-rate"] == str(RATE)
    assert wav.content[:4] == b"RIFF"
    assert seconds_of(wav.content) == pytest.approx(len(TEXT) * SECONDS_PER_CHARACTER)
    query = deepgram.speeches[-1].query
    assert (query["encoding"], query["container"], query["sample_rate"]) == (
        "linear16",
        "wav",
        str(RATE),
    )
    pcm = await client.audio.speech.create(
        model="tts-aura", input=TEXT, voice="aura-2-thalia-en", response_format="pcm"
    )
    assert pcm.response.headers["content-type"] == "audio/pcm"
    assert pcm.response.headers["x-sample-rate"] == str(RATE)
    assert len(pcm.content) == round(len(TEXT) * SECONDS_PER_CHARACTER * RATE) * 2
    assert deepgram.speeches[-1].query["container"] == "none"


async def test_sse_is_framed_by_parley_from_auras_bytes(gateway: Gateway, key: str) -> None:
    client = gateway.client(key)
    reply = await client.audio.speech.create(
        model="tts-aura",
        input=TEXT,
        voice="aura-2-thalia-en",
        response_format="pcm",
        stream_format="sse",
    )
    assert reply.response.headers["content-type"].startswith("text/event-stream")
    *deltas, done = sse_events(reply.content)
    assert deltas and all(event["type"] == "speech.audio.delta" for event in deltas)
    assert done["type"] == "speech.audio.done"
    assert done["usage"]["input_characters"] == len(TEXT)


async def test_an_unknown_voice_gets_the_models_default_and_speed_is_clamped(
    gateway: Gateway, key: str, deepgram: FakeDeepgram
) -> None:
    client = gateway.client(key)
    await client.audio.speech.create(
        model="tts-aura", input=TEXT, voice="alloy", response_format="mp3", speed=3.0
    )
    query = deepgram.speeches[-1].query
    assert query["model"] == "aura-2-thalia-en", "alloy is no Aura voice: never sent"
    assert query["speed"] == "1.5"


async def test_the_voices_are_auras_models_and_cloning_is_refused(
    gateway: Gateway, key: str
) -> None:
    status, listed = await get(gateway, key, "/audio/voices?model=tts-aura")
    assert status == 200 and listed["supports_custom"] is False
    ids = [voice["id"] for voice in listed["voices"]]
    assert ids[:2] == ["aura-2-thalia-en", "aura-2-andromeda-en"]
    assert all(voice["builtin"] for voice in listed["voices"])
    form = aiohttp.FormData()
    form.add_field("model", "tts-aura")
    form.add_field("label", "anna")
    form.add_field("file", clip("wav", 4.0), filename="anna.wav", content_type="audio/wav")
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/audio/voices", data=form, headers={"Authorization": f"Bearer {key}"}
        ) as reply,
    ):
        status, body = reply.status, await reply.json()
    assert (status, body["error"]["code"]) == (400, "cloning_not_supported")


async def test_text_past_auras_limit_is_refused_before_aura_is_called(
    gateway: Gateway, key: str, deepgram: FakeDeepgram
) -> None:
    client = gateway.client(key)
    with pytest.raises(openai.APIStatusError) as refused:
        await client.audio.speech.create(
            model="tts-aura", input="x" * 2001, voice="aura-2-thalia-en", response_format="mp3"
        )
    assert refused.value.status_code == 400
    assert "at most 2000" in refused.value.message, "the model's max_input_chars"
    assert deepgram.speeches == []
