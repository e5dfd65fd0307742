"""Speech-to-text channels that fail without callers noticing, as chat channels do: an
engine's ``retry-after`` on 429 or 503 is its breaker's cool-down, and a streamed
transcription whose engine falls silent ends at the channel's idle timeout with an error
event. (A transcription is billed per clip: a stream the upstream failed costs nothing,
``api/transcriptions.py``.)"""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest

from parley.runtime.circuit import State
from tests.api.harness import Config, StartGateway, records
from tests.clips import clip

CLIP = clip("mp3", 2.5)
IDLE = 0.3


def sick_models(config: Config) -> None:
    """``busy-stt``: an engine answering 429 with ``retry-after: 42``; ``stall-stt`` one
    whose stream falls silent after its first event, on a channel whose idle timeout is
    0.3 s."""
    openai_channel, speaches = config["channels"][0], config["channels"][1]
    busy = "whisper-1+fail-429+retry-after-42"
    openai_channel["models"].append({"name": "busy-stt", "upstream": busy})
    openai_channel["breaker"] = {"failures": 1}
    speaches["models"].append(
        {"name": "stall-stt", "upstream": "Systran/faster-whisper+stall-after-1"}
    )
    speaches["timeouts"] = {"connect": 2, "read": 30, "first_token": 5, "idle": IDLE}
    for name in ("busy-stt", "stall-stt"):
        config["models"].append(
            {
                "name": name,
                "kind": "transcription",
                "prices": {"per_minute": "0.006"},
                "transcription": {"translate": True, "stream": True},
            }
        )


async def test_an_engines_retry_after_is_its_breakers_cool_down(
    start_audio_gateway: StartGateway,
) -> None:
    gateway = await start_audio_gateway(sick_models)
    client = gateway.client(await gateway.key(await gateway.group("listeners")))
    with pytest.raises(openai.APIStatusError):
        await client.audio.transcriptions.create(model="busy-stt", file=("talk.mp3", CLIP))
    (view,) = [v for v in gateway.services.breakers.views("openai") if v.key.endswith("-42")]
    assert view.state == State.OPEN
    assert view.next_probe_at is not None
    assert 40 < view.next_probe_at - time.time() <= 42  # not the default 10 s


async def test_a_streamed_transcription_that_stalls_ends_at_the_idle_timeout(
    start_audio_gateway: StartGateway,
) -> None:
    gateway = await start_audio_gateway(sick_models)
    client = gateway.client(await gateway.key(await gateway.group("listeners")))
    began = time.monotonic()
    got: list[Any] = []
    with pytest.raises(openai.APIError) as ended:
        stream = await client.audio.transcriptions.create(
            model="stall-stt", file=("talk.mp3", CLIP), stream=True
        )
        async for event in stream:
            got.append(event)
    assert time.monotonic() - began < 5.0, "ended at the idle timeout, not the read timeout"
    assert "did not answer in time" in str(ended.value)
    assert got, "the stream had started: the failure came as an error event"
    assert not any(getattr(event, "type", "") == "transcript.text.done" for event in got)
    (record,) = await records(gateway)
    assert (record.channel, record.status, record.cost_nanos) == ("speaches", 504, 0)
