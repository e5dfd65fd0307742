"""Uploads crafted to cheat the bill or starve other tenants (issue 19), end to end."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import openai
import pytest

from tests.api.audio.conftest import NANOS_PER_SECOND
from tests.api.harness import Gateway, StartGateway, records
from tests.clips import clip
from tests.hostile_clips import codecless, one_sample_wav, rate_changing_mp3, silent_flac
from tests.upstreams.transcribers import FakeTranscriber


async def test_an_mp3_that_changes_its_rate_is_billed_every_frame(
    audio_gateway: Gateway, audio_key: str
) -> None:
    data = rate_changing_mp3([(8000, 50.0), (48_000, 10.0)])
    reply = await audio_gateway.client(audio_key).audio.transcriptions.with_raw_response.create(
        model="whisper", file=("a.mp3", data)
    )
    assert 60.0 <= float(reply.headers["x-parley-audio-seconds"]) < 60.3
    (record,) = await records(audio_gateway)
    assert record.audio_ms == 61_000
    assert record.cost_nanos == 61 * NANOS_PER_SECOND


async def test_a_one_sample_wav_is_billed_the_minimum_second(
    audio_gateway: Gateway, audio_key: str
) -> None:
    body = await audio_gateway.client(audio_key).audio.transcriptions.create(
        model="whisper", file=("a.wav", one_sample_wav())
    )
    assert body.usage is not None and body.usage.seconds == 1  # type: ignore[union-attr]
    (record,) = await records(audio_gateway)
    assert (record.status, record.audio_ms, record.cost_nanos) == (200, 1000, NANOS_PER_SECOND)


async def test_a_flac_holding_hours_of_silence_is_refused_not_billed(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber]
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await audio_gateway.client(audio_key).audio.transcriptions.create(
            model="whisper", file=("a.flac", silent_flac(20_000, 65_535, 8000))
        )
    assert (refused.value.code, refused.value.param) == ("audio_too_long", "file")
    assert engines["openai"].uploads == []
    assert await records(audio_gateway) == []


@pytest.mark.parametrize("kind", ["m4a", "webm"])
async def test_an_m4a_or_webm_with_no_known_codec_is_a_400_envelope(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber], kind: str
) -> None:
    form = aiohttp.FormData()
    form.add_field("model", "whisper")
    form.add_field("file", codecless(kind), filename=f"a.{kind}")
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{audio_gateway.v1}/audio/transcriptions",
            data=form,
            headers={"Authorization": f"Bearer {audio_key}"},
        ) as response,
    ):
        assert response.status == 400
        body = await response.json()
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == (
        "invalid_request_error",
        "file",
        "invalid_audio",
    )
    assert "no codec" in error["message"]
    assert engines["openai"].uploads == []
    assert await records(audio_gateway) == [], "a 400 before admission is not recorded"


async def test_one_groups_decoding_bombs_do_not_hold_up_another_groups_transcription(
    start_audio_gateway: StartGateway,
) -> None:
    def bounded(config: dict[str, Any]) -> None:
        config["server"]["max_audio_bytes"] = 8_000_000
        config["audio"] = {
            "threads": 2,
            "threads_per_group": 1,
            "decode_cpu_seconds": 0.5,
            "decode_cpu_seconds_per_hour": 0,
        }

    gateway = await start_audio_gateway(bounded)
    bomber = await gateway.key(await gateway.group("bombers"))
    victim = await gateway.key(await gateway.group("victims"))
    bomb = silent_flac(450_000, 16, 48_000, numbered=False)  # 5.9 MB; ~3 s of CPU whole
    ended: list[str] = []

    async def send(key: str, data: bytes, name: str) -> tuple[int, Any]:
        form = aiohttp.FormData()
        form.add_field("model", "whisper")
        form.add_field("file", data, filename="a.flac")
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{gateway.v1}/audio/transcriptions",
                data=form,
                headers={"Authorization": f"Bearer {key}"},
            ) as response,
        ):
            answer = (response.status, await response.json())
        ended.append(name)
        return answer

    bombs = [asyncio.create_task(send(bomber, bomb, f"bomb {i}")) for i in range(6)]
    for _ in range(300):  # the bombs are read and decoding (or 3 s have gone by)
        if gateway.services.probes.busy:
            break
        await asyncio.sleep(0.01)
    started = time.monotonic()
    try:
        status, body = await send(victim, clip("wav", 5.0), "victim")
        waited = time.monotonic() - started
        assert waited < 5.0, f"the victim's 5 s clip took {waited:.1f} s"
        async with asyncio.timeout(60):
            answers = await asyncio.gather(*bombs)
    finally:
        for task in bombs:
            task.cancel()

    assert status == 200, body
    assert [answer[1]["error"]["code"] for answer in answers] == ["audio_too_costly"] * 6
    assert ended.index("victim") < len(ended) - 1, f"the bombs were done first: {ended}"
    (record,) = await records(gateway)
    assert (record.status, record.audio_ms) == (200, 5000)
