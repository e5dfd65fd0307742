"""Uploads and billing: bad and oversize files refused before any engine call, every
started second billed at the model's per-minute price from Parley's own measure."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import openai
import pytest

from tests.api.audio.conftest import ENGINE_MODELS, NANOS_PER_SECOND, TRANSCRIPTIONS
from tests.api.harness import Gateway, StartGateway, call, records
from tests.clips import FORMATS, clip, streamed_wav
from tests.upstreams.transcribers import FakeTranscriber


@pytest.mark.parametrize("kind", list(FORMATS))
@pytest.mark.parametrize("model", list(ENGINE_MODELS))
async def test_a_clip_of_known_length_is_billed_its_seconds_in_every_container(
    audio_gateway: Gateway, audio_key: str, kind: str, model: str
) -> None:
    client = audio_gateway.client(audio_key)
    reply = await client.audio.transcriptions.with_raw_response.create(
        model=model, file=(f"clip.{kind}", clip(kind, 3.0))
    )
    assert reply.headers["x-parley-audio-seconds"] == "3.000"
    (record,) = await records(audio_gateway)
    assert (record.status, record.audio_ms) == (200, 3000)
    assert record.cost_nanos == 3 * NANOS_PER_SECOND
    assert record.endpoint == "/v1/audio/transcriptions"


async def test_every_started_second_is_billed_and_translations_too(
    audio_gateway: Gateway, audio_key: str
) -> None:
    client = audio_gateway.client(audio_key)
    await client.audio.translations.create(model="whisper", file=("a.flac", clip("flac", 2.2)))
    (record,) = await records(audio_gateway)
    assert (record.audio_ms, record.cost_nanos) == (3000, 3 * NANOS_PER_SECOND)
    assert record.endpoint == "/v1/audio/translations"


async def test_a_streamed_transcription_is_billed_once(
    audio_gateway: Gateway, audio_key: str
) -> None:
    stream = await audio_gateway.client(audio_key).audio.transcriptions.create(
        model="vllm-stt", file=("a.ogg", clip("ogg", 4.0)), stream=True
    )
    assert [event.type async for event in stream][-1] == "transcript.text.done"
    (record,) = await records(audio_gateway)
    assert (record.status, record.audio_ms, record.cost_nanos) == (200, 4000, 4 * NANOS_PER_SECOND)


async def test_the_engines_own_seconds_are_logged_beside_never_billed(
    audio_gateway: Gateway, audio_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="parley.audio")
    await audio_gateway.client(audio_key).audio.transcriptions.create(
        model="vllm-stt", file=("a.wav", clip("wav", 1.5))
    )
    (record,) = await records(audio_gateway)
    assert record.audio_ms == 2000
    (line,) = [r.getMessage() for r in caplog.records if r.name == "parley.audio"]
    assert f"audio {record.request_id} vllm-stt: measured 1.500 s, billed 2 s" in line
    assert "engine reported 2 s" in line


async def test_a_transcription_that_fails_upstream_is_not_billed(
    audio_gateway: Gateway, audio_key: str
) -> None:
    with pytest.raises(openai.APIStatusError) as failed:
        await audio_gateway.client(audio_key).audio.transcriptions.create(
            model="broken-stt", file=("a.mp3", clip("mp3", 2.0))
        )
    assert failed.value.status_code == 502
    (record,) = await records(audio_gateway)
    assert (record.status, record.cost_nanos) == (502, 0)


async def test_a_stream_that_fails_upstream_midway_is_not_billed(
    start_audio_gateway: StartGateway,
) -> None:
    def failing(config: dict[str, Any]) -> None:
        config["channels"][2]["models"][0]["upstream"] = "whisper+error-after-2"

    gateway = await start_audio_gateway(failing)
    key = await gateway.key(await gateway.group("team"))
    stream = await gateway.client(key).audio.transcriptions.create(
        model="vllm-stt", file=("a.mp3", clip("mp3", 2.0)), stream=True
    )
    seen = []
    with pytest.raises(openai.APIError):
        async for event in stream:
            seen.append(event.type)
    assert seen == ["transcript.text.delta"] * 2
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (502, 0)


async def test_the_usage_endpoint_totals_audio_seconds(
    audio_gateway: Gateway, audio_key: str
) -> None:
    client = audio_gateway.client(audio_key)
    await client.audio.transcriptions.create(model="whisper", file=("a.mp3", clip("mp3", 3.0)))
    await client.audio.translations.create(model="vllm-stt", file=("b.wav", clip("wav", 1.2)))
    await audio_gateway.flush_usage()
    _, usage = await call(audio_gateway, "GET", "/v1/dashboard/billing/usage", audio_key)
    assert usage["totals"]["audio_seconds"] == 5.0
    assert usage["totals"]["cost_usd"] == 5 * 0.0001
    items = {item["name"]: item for day in usage["daily_costs"] for item in day["line_items"]}
    assert items["whisper"]["audio_seconds"] == 3.0
    assert items["vllm-stt"]["audio_seconds"] == 2.0


BAD_FILES = {
    "text renamed .wav": ("speech.wav", b"Hello, this is not audio at all.\n" * 40),
    "empty": ("speech.mp3", b""),
    "m4a cut before its index": ("speech.m4a", clip("m4a", 2.0)[:4000]),
    "0-second wav": ("speech.wav", streamed_wav(0.0, 36)),
    "random bytes": ("speech.ogg", bytes(range(256)) * 16),
}


@pytest.mark.parametrize("name", list(BAD_FILES))
async def test_a_file_that_is_not_audio_is_400_before_any_engine_call(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber], name: str
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await audio_gateway.client(audio_key).audio.transcriptions.create(
            model="whisper", file=BAD_FILES[name]
        )
    assert refused.value.param == "file"
    assert refused.value.code in ("invalid_audio", "empty_audio")
    assert engines["openai"].uploads == []
    assert await records(audio_gateway) == [], "nothing was admitted, nothing is metered"


async def test_a_truncated_mp3_is_billed_for_what_is_there(
    audio_gateway: Gateway, audio_key: str
) -> None:
    whole = clip("mp3", 6.0)
    reply = await audio_gateway.client(audio_key).audio.transcriptions.with_raw_response.create(
        model="whisper", file=("cut.mp3", whole[: len(whole) // 2])
    )
    measured = float(reply.headers["x-parley-audio-seconds"])
    assert 2.5 < measured < 3.5, "its Xing header still claims 6 s"
    (record,) = await records(audio_gateway)
    assert record.audio_ms == 3000


async def test_a_streamed_wav_with_placeholder_sizes_is_measured_from_its_bytes(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber]
) -> None:
    reply = await audio_gateway.client(audio_key).audio.transcriptions.with_raw_response.create(
        model="speaches-stt", file=("s.wav", streamed_wav(2.0, 0xFFFFFFFF))
    )
    assert reply.headers["x-parley-audio-seconds"] == "2.000"


async def test_an_oversize_file_is_413_stating_the_limit(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber]
) -> None:
    big = clip("wav", 70.0)  # 16 kHz 16-bit mono: 2.24 MB, over the 2,000,000-byte cap
    with pytest.raises(openai.APIStatusError) as refused:
        await audio_gateway.client(audio_key).audio.transcriptions.create(
            model="whisper", file=("big.wav", big)
        )
    assert refused.value.status_code == 413
    assert "2000000 bytes" in refused.value.message
    assert engines["openai"].uploads == []


async def test_a_missing_file_is_400(audio_gateway: Gateway, audio_key: str) -> None:
    form = aiohttp.FormData(default_to_multipart=True)
    form.add_field("model", "whisper")
    status, body = await call(audio_gateway, "POST", TRANSCRIPTIONS, audio_key, data=form)
    assert status == 400
    assert body["error"]["param"] == "file"


async def test_a_failing_channel_falls_over_with_the_whole_file_and_bills_once(
    start_audio_gateway: StartGateway, engines: dict[str, FakeTranscriber]
) -> None:
    def failing_first(config: dict[str, Any]) -> None:
        config["channels"].append(
            {
                "name": "flaky",
                "type": "openai",
                "base_url": engines["openai"].base_url,
                "api_key": "sk-openai",
                "models": [{"name": "vllm-stt", "upstream": "whisper-1+fail-503"}],
                "priority": 10,
            }
        )

    gateway = await start_audio_gateway(failing_first)
    key = await gateway.key(await gateway.group("team"))
    data = clip("webm", 2.0)
    reply = await gateway.client(key).audio.transcriptions.create(
        model="vllm-stt", file=("a.webm", data)
    )
    assert reply.text == "This is part 1. This is part 2."
    assert [upload.file for upload in engines["openai"].uploads] == [data]
    assert [upload.file for upload in engines["vllm"].uploads] == [data]
    (record,) = await records(gateway)
    assert (record.channel, record.audio_ms, record.cost_nanos) == (
        "vllm",
        2000,
        2 * NANOS_PER_SECOND,
    )


async def test_a_caller_who_hangs_up_midway_is_billed_for_the_clip(
    start_audio_gateway: StartGateway,
) -> None:
    def slow(config: dict[str, Any]) -> None:
        config["channels"][1]["models"][0]["upstream"] = "speaches+slow-0.3"

    gateway = await start_audio_gateway(slow)
    key = await gateway.key(await gateway.group("team"))
    form = aiohttp.FormData()
    form.add_field("model", "speaches-stt")
    form.add_field("stream", "true")
    form.add_field("file", clip("mp3", 5.0), filename="a.mp3")
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/audio/transcriptions",
            data=form,
            headers={"Authorization": f"Bearer {key}"},
        ) as response,
    ):
        first = await response.content.readuntil(b"\n\n")
        assert b"transcript.text.delta" in first
    # the session is closed: the caller has gone, with four segments still to come
    async with asyncio.timeout(10):
        while not (found := await records(gateway)):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    (record,) = found
    assert (record.status, record.audio_ms, record.cost_nanos) == (499, 5000, 5 * NANOS_PER_SECOND)


async def test_a_malformed_multipart_body_is_400(audio_gateway: Gateway, audio_key: str) -> None:
    body = b'--b\r\nContent-Disposition: form-data; name="\x06\tbad"\r\n\r\nx\r\n--b--\r\n'
    multipart = {"Content-Type": "multipart/form-data; boundary=b"}
    status, reply = await call(
        audio_gateway, "POST", TRANSCRIPTIONS, audio_key, data=body, headers=multipart
    )
    assert status == 400
    assert reply["error"]["message"] == "The multipart body could not be read."


@pytest.mark.parametrize(
    ("limit", "code"),
    [({"rpm": 1}, "rate_limit_exceeded"), ({"budget_nanos": 1}, "insufficient_quota")],
)
async def test_a_caller_admission_would_refuse_is_refused_before_its_upload_is_read(
    audio_gateway: Gateway,
    engines: dict[str, FakeTranscriber],
    limit: dict[str, int],
    code: str,
) -> None:
    key = await audio_gateway.key(await audio_gateway.group("tight", **limit))
    client = audio_gateway.client(key)
    await client.audio.transcriptions.create(model="whisper", file=("a.wav", clip("wav", 1.0)))
    # Read and decoded, this upload would be a 400 (it is not audio); refused first, a 429.
    with pytest.raises(openai.RateLimitError) as refused:
        await client.audio.transcriptions.create(
            model="whisper", file=("a.wav", b"not audio at all")
        )
    assert refused.value.status_code == 429 and refused.value.code == code
    if code == "rate_limit_exceeded":  # the spec: a 429 carries X-RateLimit-Reset-*
        headers = refused.value.response.headers
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert "x-ratelimit-reset-requests" in headers and "retry-after" in headers
    else:  # a budget resets when its period ends
        assert refused.value.response.headers["x-ratelimit-reset-budget"].endswith("s")
    assert len(engines["openai"].uploads) == 1
    assert [record.status for record in await records(audio_gateway)] == [200]
