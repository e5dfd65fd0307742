"""ElevenLabs and Cartesia behind Parley's audio API, through the official ``openai`` SDK.

One gateway, two groups, and four models on the two fakes:

| model        | channel (type)        | upstream               | notes                        |
|--------------|-----------------------|------------------------|------------------------------|
| tts-eleven   | eleven (elevenlabs)   | eleven_multilingual_v2 | cloning, 24 kHz pcm          |
| tts-cartesia | cartesia (cartesia)   | sonic-2                | cloning, 44.1 kHz pcm        |
| stt-scribe   | eleven (elevenlabs)   | scribe_v1              | every format, no translation |

A caller cannot tell these engines from the others but by the voice: the same formats,
events, clone ids (``g<group>__<label>``), usage and errors.
"""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import openai
import orjson
import pytest

from tests.api.harness import Gateway, default_config, records
from tests.clips import clip
from tests.upstreams.cartesia import FakeCartesia
from tests.upstreams.elevenlabs import SCRIPT, FakeElevenLabs

ELEVEN_KEY = "sk_aaaabbbbccccddddeeeeffff0000111122223333444455556666"
CARTESIA_KEY = "sk_car_0123456789ABCDEFabcdef"
ELEVEN_VOICE = "JBFqnCBsd6RMkjVDRZzb"
CARTESIA_VOICE = "694f9389-aac1-45b6-b726-9d9369183238"
TEXT = "Hello from a hosted voice."  # 26 characters
PRICE = "0.03"


@dataclass(frozen=True)
class Model:
    name: str
    rate: int
    default_voice: str
    other_voice: str


ELEVEN = Model("tts-eleven", 24000, ELEVEN_VOICE, "21m00Tcm4TlvDq8ikWAM")
CARTESIA = Model("tts-cartesia", 44100, CARTESIA_VOICE, "e07c00bc-4134-4eae-9ea4-1a55fb45746b")
MODELS = [pytest.param(ELEVEN, id="elevenlabs"), pytest.param(CARTESIA, id="cartesia")]


@dataclass
class Hosted:
    gateway: Gateway
    eleven: FakeElevenLabs
    cartesia: FakeCartesia
    key_a: str
    key_b: str
    group_a: int
    group_b: int

    def engine(self, model: Model) -> Any:
        return self.eleven if model is ELEVEN else self.cartesia

    def spoken_voice(self, model: Model) -> str:
        """The voice id the engine was last asked to speak with."""
        sent = self.engine(model).last_request
        if model is ELEVEN:
            return str(sent.path.split("/")[3])
        return str(sent.body["voice"]["id"])


def hosted_config(eleven: FakeElevenLabs, cartesia: FakeCartesia, workdir: Path) -> Any:
    config = default_config("http://127.0.0.1:9/v1", workdir)
    timeouts = {"connect": 2, "read": 10}
    config["channels"] += [
        {
            "name": "eleven",
            "type": "elevenlabs",
            "base_url": eleven.endpoint,
            "api_key": ELEVEN_KEY,
            "models": [
                {"name": "tts-eleven", "upstream": "eleven_multilingual_v2"},
                {"name": "stt-scribe", "upstream": "scribe_v1"},
            ],
            "timeouts": timeouts,
        },
        {
            "name": "cartesia",
            "type": "cartesia",
            "base_url": cartesia.endpoint,
            "api_key": CARTESIA_KEY,
            "models": [{"name": "tts-cartesia", "upstream": "sonic-2"}],
            "timeouts": timeouts,
        },
    ]
    for model in (ELEVEN, CARTESIA):
        config["models"].append(
            {
                "name": model.name,
                "kind": "speech",
                "prices": {"per_1k_characters": PRICE},
                "audio": {
                    "default_voice": model.default_voice,
                    "cloning": True,
                    "sample_rate": model.rate,
                },
            }
        )
    config["models"].append(
        {"name": "stt-scribe", "kind": "transcription", "prices": {"per_minute": "0.006"}}
    )
    return config


@pytest.fixture
async def hosted(tmp_path: Path) -> AsyncIterator[Hosted]:
    async with (
        FakeElevenLabs(api_key=ELEVEN_KEY) as eleven,
        FakeCartesia(api_key=CARTESIA_KEY) as cartesia,
    ):
        gateway = await Gateway.start(hosted_config(eleven, cartesia, tmp_path))
        try:
            group_a, group_b = await gateway.group("alpha"), await gateway.group("beta")
            yield Hosted(
                gateway,
                eleven,
                cartesia,
                await gateway.key(group_a),
                await gateway.key(group_b),
                group_a.id,
                group_b.id,
            )
        finally:
            await gateway.stop()


def decoded(data: bytes) -> tuple[str, int, float]:
    """A container's format name, rate and length in seconds."""
    with av.open(io.BytesIO(data), mode="r") as container:
        frames = list(container.decode(audio=0))
        name = container.format.name
    rate = frames[0].sample_rate
    return name, rate, sum(frame.samples for frame in frames) / rate


# speech


@pytest.mark.parametrize("model", MODELS)
async def test_every_format_comes_back_as_asked(hosted: Hosted, model: Model) -> None:
    client = hosted.gateway.client(hosted.key_a)
    seconds = len(TEXT) * 0.02
    wav = await client.audio.speech.with_raw_response.create(
        model=model.name, input=TEXT, voice=model.other_voice, response_format="wav"
    )
    assert wav.headers["content-type"] == "audio/wav"
    assert wav.headers["x-sample-rate"] == str(model.rate)
    name, rate, length = decoded(wav.content)
    assert (name, rate) == ("wav", model.rate) and length == pytest.approx(seconds, abs=1e-3)
    pcm = await client.audio.speech.create(
        model=model.name, input=TEXT, voice=model.other_voice, response_format="pcm"
    )
    assert len(pcm.content) == round(seconds * model.rate) * 2
    mp3 = await client.audio.speech.create(
        model=model.name, input=TEXT, voice=model.other_voice, response_format="mp3"
    )
    name, _, length = decoded(mp3.content)
    assert name == "mp3" and length == pytest.approx(seconds, abs=0.06)
    assert hosted.spoken_voice(model) == model.other_voice


@pytest.mark.parametrize("model", MODELS)
async def test_sse_relays_the_audio_as_speech_audio_delta_events(
    hosted: Hosted, model: Model
) -> None:
    client = hosted.gateway.client(hosted.key_a)
    async with client.audio.speech.with_streaming_response.create(
        model=model.name,
        input=TEXT,
        voice=model.default_voice,
        response_format="pcm",
        stream_format="sse",
    ) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        raw = b"".join([piece async for piece in reply.iter_bytes()])
    events = [orjson.loads(line[6:]) for line in raw.splitlines() if line.startswith(b"data: ")]
    deltas = [event for event in events if event["type"] == "speech.audio.delta"]
    assert len(deltas) > 3 and events[-1]["type"] == "speech.audio.done"
    audio = b"".join(base64.b64decode(event["audio"]) for event in deltas)
    assert len(audio) == round(len(TEXT) * 0.02 * model.rate) * 2
    assert events[-1]["usage"]["input_characters"] == len(TEXT)


@pytest.mark.parametrize("model", MODELS)
async def test_speech_is_billed_per_character_sent(hosted: Hosted, model: Model) -> None:
    client = hosted.gateway.client(hosted.key_a)
    await client.audio.speech.create(model=model.name, input=TEXT, voice=model.default_voice)
    (record,) = await records(hosted.gateway)
    assert (record.status, record.characters) == (200, len(TEXT))
    assert record.cost_nanos == len(TEXT) * 30_000  # $0.03 per 1K characters


@pytest.mark.parametrize("model", MODELS)
async def test_an_unknown_voice_gets_the_default_and_is_never_sent(
    hosted: Hosted, model: Model
) -> None:
    client = hosted.gateway.client(hosted.key_a)
    await client.audio.speech.create(model=model.name, input=TEXT, voice="no-such-voice")
    assert hosted.spoken_voice(model) == model.default_voice


@pytest.mark.parametrize("model", MODELS)
async def test_an_engine_refusal_is_openais_envelope_without_the_key(
    hosted: Hosted, model: Model
) -> None:
    hosted.engine(model).api_key = "rotated"
    client = hosted.gateway.client(hosted.key_a)
    with pytest.raises(openai.APIStatusError) as failed:
        await client.audio.speech.create(model=model.name, input=TEXT, voice=model.default_voice)
    error = failed.value.body
    assert failed.value.status_code == 502 and isinstance(error, dict)
    assert set(error) == {"message", "type", "param", "code"}
    assert ELEVEN_KEY not in str(error) and CARTESIA_KEY not in str(error)


# clones


@pytest.mark.parametrize("model", MODELS)
async def test_a_clone_is_private_to_its_group_and_deleted_at_the_engine(
    hosted: Hosted, model: Model
) -> None:
    a, b = hosted.gateway.client(hosted.key_a), hosted.gateway.client(hosted.key_b)
    extra = {"model": model.name}
    voice = await a.audio.voices.create(
        name="Anna",
        audio_sample=("anna.mp3", clip("mp3", 4.0), "audio/mpeg"),
        consent="cons_42",
        extra_query=extra,
    )
    assert voice.id == f"g{hosted.group_a}__Anna"
    engine = hosted.engine(model)
    (engine_id,) = [key for key, made in engine.voices.items() if made["name"] == voice.id]
    assert "cons_42" in engine.voices[engine_id]["description"]

    listing_a = await a.get("/audio/voices", cast_to=dict, options={"params": extra})
    listing_b = await b.get("/audio/voices", cast_to=dict, options={"params": extra})
    ids_a = {record["id"] for record in listing_a["voices"]}
    ids_b = {record["id"] for record in listing_b["voices"]}
    assert voice.id in ids_a and voice.id not in ids_b
    assert engine_id not in ids_a | ids_b, "the engine's id of a clone is never shown"

    await a.audio.speech.create(model=model.name, input=TEXT, voice=voice.id)
    assert hosted.spoken_voice(model) == engine_id
    for stolen in (voice.id, engine_id):
        await b.audio.speech.create(model=model.name, input=TEXT, voice=stolen)
        assert hosted.spoken_voice(model) == model.default_voice

    deleted = await a.audio.voices.delete(voice.id, extra_query=extra)
    assert deleted.deleted and engine_id not in engine.voices
    assert await hosted.gateway.services.store.list_clones() == []


@pytest.mark.parametrize("model", MODELS)
async def test_a_deletion_the_engine_fails_is_done_for_the_caller_and_kept_to_retry(
    hosted: Hosted, model: Model, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="parley.voices")
    a = hosted.gateway.client(hosted.key_a)
    extra = {"model": model.name}
    voice = await a.audio.voices.create(
        name="Bo",
        audio_sample=("bo.wav", clip("wav", 4.0), "audio/wav"),
        consent="cons_7",
        extra_query=extra,
    )
    engine = hosted.engine(model)
    engine.busy = 503
    deleted = await a.audio.voices.delete(voice.id, extra_query=extra)
    assert deleted.deleted and deleted.id == voice.id
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "parley.voices"]
    assert voice.id in warning and f"`{'eleven' if model is ELEVEN else 'cartesia'}`" in warning
    store = hosted.gateway.services.store
    assert await store.list_clones() == []
    (pending,) = await store.list_deletions()
    assert pending.voice_id == voice.id and pending.engine_name in engine.voices
    assert pending.attempts == 1 and "HTTP 503" in (pending.last_error or "")

    engine.busy = None
    listing = await a.get("/audio/voices", cast_to=dict, options={"params": extra})
    assert voice.id not in {record["id"] for record in listing["voices"]}
    await a.audio.speech.create(model=model.name, input=TEXT, voice=voice.id)
    assert hosted.spoken_voice(model) == model.default_voice, "never used again"
    with pytest.raises(openai.NotFoundError):
        await a.audio.voices.delete(voice.id, extra_query=extra)
    assert pending.engine_name in engine.voices, "left to the background retries"


async def test_a_clones_engine_id_is_never_used_even_when_the_roster_is_unknown(
    hosted: Hosted,
) -> None:
    a, b = hosted.gateway.client(hosted.key_a), hosted.gateway.client(hosted.key_b)
    extra = {"model": ELEVEN.name}
    voice = await a.audio.voices.create(
        name="Cy",
        audio_sample=("cy.mp3", clip("mp3", 4.0), "audio/mpeg"),
        consent="cons_9",
        extra_query=extra,
    )
    (engine_id,) = [key for key, made in hosted.eleven.voices.items() if made["name"] == voice.id]
    hosted.eleven.list_fails = True  # unknown voices are then passed through
    await b.audio.speech.create(model=ELEVEN.name, input=TEXT, voice="pNInz6obpgDQGcFmaJgB")
    assert hosted.spoken_voice(ELEVEN) == "pNInz6obpgDQGcFmaJgB"
    await b.audio.speech.create(model=ELEVEN.name, input=TEXT, voice=engine_id)
    assert hosted.spoken_voice(ELEVEN) == ELEVEN.default_voice


# transcription (Scribe)


async def test_scribe_answers_verbose_json_with_segments_and_words(hosted: Hosted) -> None:
    client = hosted.gateway.client(hosted.key_a)
    reply = await client.audio.transcriptions.create(
        model="stt-scribe",
        file=("talk.mp3", clip("mp3", 3.0)),
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
        language="en",
    )
    assert reply.text == SCRIPT and reply.language == "english"
    assert reply.duration == pytest.approx(3.0, abs=1e-3)
    assert [segment.text for segment in reply.segments or []] == [
        "Hello there.",
        "How are you today?",
        "Fine thanks",
    ]
    assert [word.word for word in reply.words or []] == SCRIPT.split()
    assert hosted.eleven.last_request.body["language_code"] == "en"


@pytest.mark.parametrize("fmt", ["json", "text", "srt", "vtt"])
async def test_scribe_answers_every_format(hosted: Hosted, fmt: str) -> None:
    client = hosted.gateway.client(hosted.key_a)
    reply = await client.audio.transcriptions.with_raw_response.create(
        model="stt-scribe", file=("talk.wav", clip("wav", 2.0)), response_format=fmt
    )
    body = reply.content.decode()
    if fmt == "json":
        assert orjson.loads(body) == {"text": SCRIPT, "usage": {"type": "duration", "seconds": 2}}
    elif fmt == "text":
        assert body == SCRIPT + "\n"
    else:
        assert body.count("-->") == 3 and ("WEBVTT" in body) == (fmt == "vtt")


async def test_scribe_is_billed_by_parleys_measure_not_its_claim(hosted: Hosted) -> None:
    hosted.eleven.claimed_seconds = 1.0
    client = hosted.gateway.client(hosted.key_a)
    reply = await client.audio.transcriptions.with_raw_response.create(
        model="stt-scribe", file=("talk.ogg", clip("ogg", 4.2))
    )
    assert reply.headers["x-parley-audio-seconds"] == "4.200"
    (record,) = await records(hosted.gateway)
    assert (record.audio_ms, record.cost_nanos) == (5000, 5 * 100_000)


async def test_scribe_models_refuse_translation(hosted: Hosted) -> None:
    client = hosted.gateway.client(hosted.key_a)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.audio.translations.create(
            model="stt-scribe", file=("talk.mp3", clip("mp3", 2.0))
        )
    assert refused.value.code == "translation_not_supported"
    assert [r.path for r in hosted.eleven.requests] == []
