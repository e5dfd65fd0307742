"""A gateway with three speech models, each on its own fake engine, and two groups.

- ``tts-pro`` (alias ``pro``): vLLM-Omni style engine (``openai-audio``), the catalogue
  ``examples/voices/qwen3-tts.yaml``, cloning with transcripts, instructions, 400 on
  opus/aac/flac, ``status`` on every voice.
- ``tts-fast``: Supertonic (``supertonic``), ``examples/voices/supertonic.yaml``, quality
  levels, WAV fallback, 44.1 kHz pcm.
- ``tts-plain``: a Kokoro / tts-1 style engine (``openai-audio``) without voice management.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.api.harness import Gateway, default_config
from tests.upstreams.openai_audio import FakeAudioEngine
from tests.upstreams.supertonic import FakeSupertonic

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "voices"
PRICE_PER_1K_CHARACTERS = "0.015"


@dataclass
class Engines:
    omni: FakeAudioEngine
    tonic: FakeSupertonic
    plain: FakeAudioEngine


@dataclass
class Tenants:
    gateway: Gateway
    engines: Engines
    key_a: str
    key_b: str
    group_a: int
    group_b: int


def speech_config(engines: Engines, chat_url: str, workdir: Path) -> dict[str, Any]:
    config = default_config(chat_url, workdir)
    config["channels"] += [
        _channel("omni", "openai-audio", engines.omni.base_url, "tts-pro", "qwen3-tts"),
        _channel("tonic", "supertonic", engines.tonic.base_url, "tts-fast", None),
        _channel("kokoro", "openai-audio", engines.plain.base_url, "tts-plain", "kokoro"),
    ]
    prices = {"per_1k_characters": PRICE_PER_1K_CHARACTERS}
    config["models"] += [
        {
            "name": "tts-pro",
            "kind": "speech",
            "aliases": ["pro"],
            "prices": prices,
            "audio": {
                "voices_catalogue": str(EXAMPLES / "qwen3-tts.yaml"),
                "cloning": True,
                "transcript_cloning": True,
                "instruction": True,
                "status_on_every_voice": True,
                "max_input_chars": 500,
            },
        },
        {
            "name": "tts-fast",
            "kind": "speech",
            "prices": prices,
            "audio": {
                "voices_catalogue": str(EXAMPLES / "supertonic.yaml"),
                "unsupported_formats": "wav",
                "quality_steps": {"standard": 4, "high": 8, "max": 16},
                "default_quality": "high",
                "sample_rate": 44100,
            },
        },
        {
            "name": "tts-plain",
            "kind": "speech",
            "prices": prices,
            "audio": {"voice_listing": False},
        },
    ]
    config["capabilities"]["TTS_PRO"] = "tts-pro"
    return config


def _channel(name: str, kind: str, url: str, model: str, upstream: str | None) -> dict[str, Any]:
    served = {"name": model, "upstream": upstream} if upstream else {"name": model}
    return {
        "name": name,
        "type": kind,
        "base_url": url,
        "models": [served],
        "timeouts": {"connect": 2, "read": 10},
    }


@pytest.fixture
async def engines() -> AsyncIterator[Engines]:
    async with (
        FakeAudioEngine() as omni,
        FakeSupertonic() as tonic,
        FakeAudioEngine.plain() as plain,
    ):
        yield Engines(omni, tonic, plain)


@pytest.fixture
async def tenants(engines: Engines, tmp_path: Path) -> AsyncIterator[Tenants]:
    gateway = await Gateway.start(speech_config(engines, "http://127.0.0.1:9/v1", tmp_path))
    try:
        group_a, group_b = await gateway.group("alpha"), await gateway.group("beta")
        yield Tenants(
            gateway,
            engines,
            await gateway.key(group_a),
            await gateway.key(group_b),
            group_a.id,
            group_b.id,
        )
    finally:
        await gateway.stop()
