"""POST /v1/audio/speech through the official SDK and raw HTTP, against each fake engine."""

from __future__ import annotations

import asyncio
import base64
import io
import struct
from datetime import UTC, date, datetime, timedelta
from typing import Any

import aiohttp
import av
import openai
import orjson
import pytest

from parley.domain.voices import Clone
from tests.api.speech.conftest import Tenants
from tests.upstreams.openai_audio import SECONDS_PER_CHARACTER

TEXT = "Hello from the speech gateway."  # 30 characters: 0.6 s of audio at the engine


def seconds_of(data: bytes) -> float:
    with av.open(io.BytesIO(data), mode="r") as container:
        frames = list(container.decode(audio=0))
    return sum(f.samples for f in frames) / frames[0].sample_rate


async def post_speech(tenants: Tenants, body: dict[str, Any], key: str | None = None) -> Any:
    """(status, content type, body bytes) of a raw HTTP speech call."""
    status, kind, audio, _ = await post_speech_with_headers(tenants, body, key)
    return status, kind, audio


async def post_speech_with_headers(
    tenants: Tenants, body: dict[str, Any], key: str | None = None
) -> Any:
    """(status, content type, body bytes, headers) of a raw HTTP speech call."""
    headers = {"Authorization": f"Bearer {key or tenants.key_a}"}
    async with aiohttp.ClientSession() as session:
        url = f"{tenants.gateway.v1}/audio/speech"
        async with session.post(url, json=body, headers=headers) as reply:
            return reply.status, reply.content_type, await reply.read(), reply.headers


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    events = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            payload = orjson.loads(lines["data"])
            assert lines.get("event") == payload["type"]
            events.append(payload)
    return events


# formats


async def test_the_sdk_gets_a_wav_by_default_relayed_with_its_streamed_header(
    tenants: Tenants,
) -> None:
    client = tenants.gateway.client(tenants.key_a)
    reply = await client.audio.speech.create(model="tts-pro", input=TEXT, voice="vivian")
    audio = reply.content
    assert reply.response.headers["content-type"] == "audio/wav"
    assert audio[:4] == b"RIFF" and struct.unpack("<I", audio[40:44])[0] == 0xFFFFFFFF
    assert len(audio) == 44 + 24000 * 2 * len(TEXT) * SECONDS_PER_CHARACTER
    sent = tenants.engines.omni.last_request.body
    assert sent["model"] == "qwen3-tts" and sent["voice"] == "vivian"
    assert sent["stream_format"] == "audio" and "stream" not in sent


@pytest.mark.parametrize("model", ["tts-pro", "tts-fast"])
async def test_mp3_and_pcm_have_their_content_types_and_lengths(
    tenants: Tenants, model: str
) -> None:
    status, kind, mp3 = await post_speech(
        tenants, {"model": model, "input": TEXT, "response_format": "mp3"}
    )
    assert (status, kind) == (200, "audio/mpeg")
    assert seconds_of(mp3) == pytest.approx(0.6, abs=0.08)
    status, kind, pcm, headers = await post_speech_with_headers(
        tenants, {"model": model, "input": TEXT, "response_format": "pcm"}
    )
    rate = 24000 if model == "tts-pro" else 44100  # the profile's; Supertonic's own header
    assert (status, kind) == (200, "audio/pcm")
    assert len(pcm) == round(0.6 * rate) * 2 and pcm[:4] != b"RIFF"
    assert headers["x-sample-rate"] == str(rate)  # raw samples say nothing of their rate
    assert (
        "x-sample-rate"
        not in (
            await post_speech_with_headers(
                tenants, {"model": model, "input": TEXT, "response_format": "mp3"}
            )
        )[3]
    )


async def test_unsupported_formats_fall_back_to_wav_on_fast_and_are_refused_on_pro(
    tenants: Tenants,
) -> None:
    for fmt in ("opus", "aac", "flac"):
        status, kind, audio = await post_speech(
            tenants, {"model": "tts-fast", "input": TEXT, "response_format": fmt}
        )
        assert (status, kind, audio[:4]) == (200, "audio/wav", b"RIFF")
        status, _, body = await post_speech(
            tenants, {"model": "tts-pro", "input": TEXT, "response_format": fmt}
        )
        error = orjson.loads(body)["error"]
        assert (status, error["param"]) == (400, "response_format")


# fields and their rules


async def test_speed_outside_the_range_is_a_400_and_fast_clamps_what_it_cannot_do(
    tenants: Tenants,
) -> None:
    client = tenants.gateway.client(tenants.key_a)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.audio.speech.create(model="tts-pro", input=TEXT, voice="ryan", speed=4.5)
    assert refused.value.body["param"] == "speed"  # type: ignore[index]
    await post_speech(tenants, {"model": "tts-fast", "input": TEXT, "speed": 4.0})
    assert tenants.engines.tonic.last_body["speed"] == 2.0


async def test_quality_and_instruction_only_where_declared(tenants: Tenants) -> None:
    status, _, body = await post_speech(
        tenants, {"model": "tts-pro", "input": TEXT, "quality": "max"}
    )
    assert (status, orjson.loads(body)["error"]["param"]) == (400, "quality")
    status, _, body = await post_speech(
        tenants, {"model": "tts-fast", "input": TEXT, "instruction": "whisper"}
    )
    assert (status, orjson.loads(body)["error"]["param"]) == (400, "instruction")
    await post_speech(tenants, {"model": "tts-fast", "input": TEXT, "quality": "max"})
    assert tenants.engines.tonic.last_body["steps"] == 16
    await post_speech(tenants, {"model": "tts-fast", "input": TEXT})
    assert tenants.engines.tonic.last_body["steps"] == 8  # default_quality: high
    status, _, _ = await post_speech(
        tenants, {"model": "tts-pro", "input": TEXT, "instruction": "Speak softly."}
    )
    assert (
        status == 200 and tenants.engines.omni.last_request.body["instructions"] == "Speak softly."
    )


async def test_input_past_the_models_limit_is_a_400_stating_it(tenants: Tenants) -> None:
    status, _, body = await post_speech(tenants, {"model": "tts-pro", "input": "x" * 501})
    error = orjson.loads(body)["error"]
    assert status == 400 and "at most 500" in error["message"] and error["param"] == "input"


async def test_voice_is_optional_and_may_be_an_object(tenants: Tenants) -> None:
    status, _, _ = await post_speech(tenants, {"model": "tts-pro", "input": TEXT})
    assert status == 200 and "voice" not in tenants.engines.omni.last_request.body
    status, _, _ = await post_speech(
        tenants, {"model": "tts-pro", "input": TEXT, "voice": {"id": "ryan"}}
    )
    assert status == 200 and tenants.engines.omni.last_request.body["voice"] == "ryan"


async def test_an_unknown_voice_is_a_200_with_the_engine_default(tenants: Tenants) -> None:
    status, _, audio = await post_speech(
        tenants, {"model": "tts-pro", "input": TEXT, "voice": "nobody"}
    )
    assert status == 200 and audio[:4] == b"RIFF"
    assert "voice" not in tenants.engines.omni.last_request.body
    status, _, _ = await post_speech(tenants, {"model": "tts-fast", "input": TEXT, "voice": "X9"})
    assert status == 200 and "voice" not in tenants.engines.tonic.last_body


async def test_another_groups_clone_is_an_unknown_voice_never_sent(tenants: Tenants) -> None:
    name = f"g{tenants.group_b}__bert"
    tenants.engines.omni.uploaded[name] = {"name": name}
    clone = Clone(tenants.group_b, "tts-pro", "bert", name, name, "omni", 4000, datetime.now(UTC))
    await tenants.gateway.services.clones.add(clone)
    await post_speech(tenants, {"model": "tts-pro", "input": TEXT, "voice": name}, tenants.key_b)
    assert tenants.engines.omni.last_request.body["voice"] == name
    status, _, _ = await post_speech(tenants, {"model": "tts-pro", "input": TEXT, "voice": name})
    assert status == 200 and "voice" not in tenants.engines.omni.last_request.body


# streaming


async def test_sse_through_the_sdk_carries_deltas_and_usage(tenants: Tenants) -> None:
    client = tenants.gateway.client(tenants.key_a)
    async with client.audio.speech.with_streaming_response.create(
        model="tts-pro", input=TEXT, voice="vivian", response_format="wav", stream_format="sse"
    ) as reply:
        assert reply.headers["content-type"] == "text/event-stream"
        raw = await reply.read()
    events = sse_events(raw)
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert len(deltas) == 4 and audio[:4] == b"RIFF"  # the engine's four pieces
    assert seconds_of(audio) == pytest.approx(0.6, abs=0.01)
    assert events[-1] == {
        "type": "speech.audio.done",
        "usage": {
            "input_tokens": 5,
            "output_tokens": 6,
            "total_tokens": 11,
            "input_characters": len(TEXT),
        },
    }
    assert tenants.engines.omni.last_request.body["stream_format"] == "sse"


async def test_stream_true_gives_sse_synthesized_by_parley_for_an_engine_without_it(
    tenants: Tenants,
) -> None:
    status, kind, raw, headers = await post_speech_with_headers(
        tenants, {"model": "tts-fast", "input": TEXT, "stream": True, "response_format": "pcm"}
    )
    assert (status, kind, headers["x-sample-rate"]) == (200, "text/event-stream", "44100")
    events = sse_events(raw)
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert len(audio) == round(0.6 * 44100) * 2
    assert events[-1]["usage"] == {
        "input_tokens": 8,
        "output_tokens": 0,
        "total_tokens": 8,
        "input_characters": 30,
    }


async def test_first_audio_reaches_the_caller_before_the_engine_has_finished(
    tenants: Tenants,
) -> None:
    engine = tenants.engines.omni
    engine.gate = asyncio.Event()
    headers = {"Authorization": f"Bearer {tenants.key_a}"}
    async with aiohttp.ClientSession() as session:
        body = {"model": "tts-pro", "input": TEXT}
        async with session.post(
            f"{tenants.gateway.v1}/audio/speech", json=body, headers=headers
        ) as reply:
            first = await reply.content.readany()
            assert first[:4] == b"RIFF"
            assert engine.completed_streams == 0, "the engine is held after its first piece"
            engine.gate.set()
            rest = await reply.read()
    assert len(first + rest) == 44 + 24000 * 2 * 0.6 and engine.completed_streams == 1


async def test_an_engine_that_dies_mid_stream_cuts_raw_audio_and_ends_sse_with_an_error(
    tenants: Tenants,
) -> None:
    tenants.engines.omni.drop_after = 2
    headers = {"Authorization": f"Bearer {tenants.key_a}"}
    async with aiohttp.ClientSession() as session:
        url = f"{tenants.gateway.v1}/audio/speech"
        async with session.post(
            url, json={"model": "tts-pro", "input": TEXT}, headers=headers
        ) as reply:
            assert reply.status == 200
            with pytest.raises(aiohttp.ClientPayloadError):
                await reply.read()
    status, _, raw = await post_speech(
        tenants, {"model": "tts-pro", "input": TEXT, "stream_format": "sse"}
    )
    events = sse_events(raw)
    assert status == 200 and [e["type"] for e in events][-1] == "speech.audio.error"
    assert events[-1]["error"]["type"] == "upstream_error"
    assert len([e for e in events if e["type"] == "speech.audio.delta"]) == 2


# billing and limits


async def test_speech_is_billed_per_character_and_shown_in_usage(tenants: Tenants) -> None:
    client = tenants.gateway.client(tenants.key_a)
    await client.audio.speech.create(model="tts-pro", input=TEXT, voice="vivian")
    await tenants.gateway.flush_usage()
    today = datetime.now(UTC).date()
    report = await client.get(
        "/dashboard/billing/usage",
        cast_to=dict,
        options={"params": {"start_date": str(today), "end_date": str(today + timedelta(1))}},
    )
    assert report["totals"]["characters"] == len(TEXT)
    assert report["totals"]["cost_usd"] == pytest.approx(len(TEXT) * 0.015 / 1000)
    assert report["total_usage"] == pytest.approx(len(TEXT) * 0.015 / 1000 * 100)
    assert isinstance(date.fromisoformat(report["start_date"]), date)


async def test_characters_count_against_the_token_rate(tenants: Tenants) -> None:
    small = await tenants.gateway.group("small", tpm=50)
    key = await tenants.gateway.key(small)
    status, _, body = await post_speech(tenants, {"model": "tts-pro", "input": "x" * 201}, key)
    assert status == 429 and "51 tokens" in orjson.loads(body)["error"]["message"]
    status, _, _ = await post_speech(tenants, {"model": "tts-pro", "input": "x" * 200}, key)
    assert status == 200
    status, _, _ = await post_speech(tenants, {"model": "tts-pro", "input": "x" * 8}, key)
    assert status == 429


async def test_a_model_without_voice_listing_passes_its_voices_through(tenants: Tenants) -> None:
    status, kind, audio = await post_speech(
        tenants, {"model": "tts-plain", "input": TEXT, "voice": "am_adam"}
    )
    assert (status, kind, audio[:4]) == (200, "audio/wav", b"RIFF")
    status, kind, raw = await post_speech(
        tenants, {"model": "tts-plain", "input": TEXT, "stream_format": "sse"}
    )
    assert (status, kind) == (200, "text/event-stream")
    assert sse_events(raw)[-1]["type"] == "speech.audio.done"
    engine = tenants.engines.plain
    assert [r.method for r in engine.requests] == ["POST", "POST"]
    assert engine.requests[0].body["voice"] == "am_adam"
    assert engine.requests[1].body["stream_format"] == "sse"  # asked, ignored by the engine
