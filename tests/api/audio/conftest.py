"""A gateway in front of the three fake speech-to-text engines (OpenAI, speaches, vLLM).

Public models, what they can do, and where they go:

| model           | channel (type)     | upstream               | translate | stream | formats   |
|-----------------|--------------------|------------------------|-----------|--------|-----------|
| whisper         | openai (openai)    | whisper-1              | yes       | no     | all       |
| gpt4o-stt       | openai (openai)    | gpt-4o-transcribe      | no        | yes    | json text |
| speaches-stt    | speaches (speaches)| Systran/faster-whisper | yes       | yes    | all       |
| vllm-stt        | vllm (vllm)        | openai/whisper-large-v3| yes       | yes    | all       |
| broken-stt      | openai (openai)    | whisper-1+fail-500     | yes       | yes    | all       |

Every model costs ``PER_MINUTE`` dollars a minute of audio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.api.harness import Gateway, StartGateway, local_state, starting
from tests.upstreams.transcribers import FakeTranscriber

PER_MINUTE = Decimal("0.006")
NANOS_PER_SECOND = 100_000  # $0.006 a minute = $0.0001 a second = 100,000 nano-dollars
ENGINE_MODELS = {"whisper": "openai", "speaches-stt": "speaches", "vllm-stt": "vllm"}
"""The models that do everything, and the engine behind each."""
TRANSCRIPTIONS = "/v1/audio/transcriptions"


@pytest.fixture
async def engines() -> AsyncIterator[dict[str, FakeTranscriber]]:
    async with (
        FakeTranscriber("openai", api_key="sk-openai") as openai_engine,
        FakeTranscriber("speaches") as speaches,
        FakeTranscriber("vllm") as vllm,
    ):
        yield {"openai": openai_engine, "speaches": speaches, "vllm": vllm}


def _model(name: str, **abilities: Any) -> dict[str, Any]:
    options = {"translate": True, "stream": True, **abilities}
    return {
        "name": name,
        "kind": "transcription",
        "prices": {"per_minute": str(PER_MINUTE)},
        "transcription": options,
    }


def audio_config(engines: dict[str, FakeTranscriber], workdir: Path) -> dict[str, Any]:
    def channel(name: str, models: list[dict[str, str]], key: str | None = None) -> dict[str, Any]:
        found = {"name": name, "type": name, "base_url": engines[name].base_url, "models": models}
        if key is not None:
            found["api_key"] = key
        return found

    return {
        **local_state(workdir),
        "server": {"max_audio_bytes": 2_000_000},
        "channels": [
            channel(
                "openai",
                [
                    {"name": "whisper", "upstream": "whisper-1"},
                    {"name": "gpt4o-stt", "upstream": "gpt-4o-transcribe"},
                    {"name": "broken-stt", "upstream": "whisper-1+fail-500"},
                ],
                key="sk-openai",
            ),
            channel("speaches", [{"name": "speaches-stt", "upstream": "Systran/faster-whisper"}]),
            channel("vllm", [{"name": "vllm-stt", "upstream": "openai/whisper-large-v3"}]),
        ],
        "models": [
            _model("whisper", stream=False),
            _model("gpt4o-stt", translate=False, formats=["json", "text"]),
            _model("speaches-stt"),
            _model("vllm-stt"),
            _model("broken-stt"),
            {"name": "chat-large", "kind": "chat"},
        ],
        "capabilities": {"STT": "whisper", "STT_STREAM": "gpt4o-stt"},
    }


@pytest.fixture
async def start_audio_gateway(
    engines: dict[str, FakeTranscriber], tmp_path: Path
) -> AsyncIterator[StartGateway]:
    async with starting(lambda: audio_config(engines, tmp_path)) as start:
        yield start


@pytest.fixture
async def audio_gateway(start_audio_gateway: StartGateway) -> Gateway:
    return await start_audio_gateway()


@pytest.fixture
async def audio_key(audio_gateway: Gateway) -> str:
    return await audio_gateway.key(await audio_gateway.group("listeners"))
