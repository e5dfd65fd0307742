"""Speech routes like text: a dead channel in front of an engine is fallen over, then
skipped once its breaker opens; an engine's ``retry-after`` is its breaker's cool-down;
a synthesis that stalls ends at the channel's idle timeout."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from parley.runtime.circuit import State
from tests.api.harness import Gateway, records
from tests.api.speech.conftest import Engines, speech_config

DEAD_URL = "http://127.0.0.1:9/v1"


async def test_a_dead_speech_channel_is_fallen_over_then_skipped(
    engines: Engines, tmp_path: Path
) -> None:
    config = speech_config(engines, DEAD_URL, tmp_path)
    config["channels"].append(
        {
            "name": "dead-tts",
            "type": "openai-audio",
            "base_url": DEAD_URL,
            "models": [{"name": "tts-plain", "upstream": "kokoro"}],
            "priority": 5,
        }
    )
    gateway = await Gateway.start(config)
    try:
        client = gateway.client(await gateway.key(await gateway.group("team")))
        tried: list[str] = []
        gateway.services.watchers.upstream_failed.append(
            lambda call, route, error, seconds: tried.append(route.target.channel)
        )
        for _ in range(7):
            reply = await client.audio.speech.create(
                model="tts-plain", input="Hello there.", voice="af_heart"
            )
            assert reply.content[:4] == b"RIFF"
        assert tried == ["dead-tts"] * 5
        (own,) = [v for v in gateway.services.breakers.views("dead-tts") if not v.model]
        assert own.state == State.OPEN
    finally:
        await gateway.stop()


def _with_breaker_and_idle(config: dict[str, Any]) -> dict[str, Any]:
    """Every speech channel opens its breaker on one failure, and ends a stream silent
    for ``IDLE`` seconds."""
    for channel in config["channels"]:
        if channel.get("type") in ("openai-audio", "supertonic"):
            channel["breaker"] = {"failures": 1}
            channel["timeouts"] = {"connect": 2, "read": 30, "first_token": 5, "idle": IDLE}
    return config


IDLE = 0.3


ENGINES = [("omni", "tts-pro", "omni"), ("tonic", "tts-fast", "tonic")]


@pytest.mark.parametrize(("engine", "model", "channel"), ENGINES)
@pytest.mark.parametrize("status", [429, 503])
async def test_an_engines_retry_after_is_its_breakers_cool_down(
    engines: Engines, tmp_path: Path, engine: str, model: str, channel: str, status: int
) -> None:
    busy = getattr(engines, engine)
    busy.busy, busy.busy_retry_after = status, 42
    gateway = await Gateway.start(
        _with_breaker_and_idle(speech_config(engines, DEAD_URL, tmp_path))
    )
    try:
        client = gateway.client(await gateway.key(await gateway.group("team")))
        with pytest.raises(openai.APIStatusError):
            await client.audio.speech.create(model=model, input="Hello there.", voice="M1")
        (view,) = [v for v in gateway.services.breakers.views(channel) if v.model]
        assert view.state == State.OPEN
        assert view.next_probe_at is not None
        assert 40 < view.next_probe_at - time.time() <= 42  # not the default 10 s
    finally:
        await gateway.stop()


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
async def test_speech_that_stalls_midway_ends_at_the_idle_timeout(
    engines: Engines, tmp_path: Path, stream_format: str
) -> None:
    engines.omni.gate = asyncio.Event()  # never set: the engine stalls after its first piece
    gateway = await Gateway.start(
        _with_breaker_and_idle(speech_config(engines, DEAD_URL, tmp_path))
    )
    try:
        key = await gateway.key(await gateway.group("team"))
        body = {"model": "tts-pro", "input": "Hello there, a longer line.", "voice": "vivian"}
        received = b""
        began = time.monotonic()
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
            session.post(
                f"{gateway.v1}/audio/speech", json={**body, "stream_format": stream_format}
            ) as response,
        ):
            assert response.status == 200
            try:
                async for piece in response.content.iter_any():
                    received += piece
            except aiohttp.ClientPayloadError:
                assert stream_format == "audio", "raw audio is cut: the body is seen truncated"
        assert time.monotonic() - began < 5.0, "ended at the idle timeout, not the read timeout"
        if stream_format == "sse":
            last = received.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
            assert last.startswith(b"event: speech.audio.error\n")
            assert b"did not answer in time" in last
        else:
            assert received.startswith(b"RIFF")
        (record,) = await records(gateway)
        assert (record.channel, record.status) == ("omni", 504)
        assert record.characters == len(body["input"]) and record.cost_nanos > 0
    finally:
        engines.omni.gate.set()
        await gateway.stop()
