"""Speech routes like text: a dead channel in front of an engine is fallen over, then
skipped once its breaker opens."""

from __future__ import annotations

from pathlib import Path

from parley.pipeline.breaker import State
from tests.api.harness import Gateway
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
            lambda call, channel, error, seconds: tried.append(channel)
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
