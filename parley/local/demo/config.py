"""The offline demo's gateway configuration: one channel per local engine, three models.

| model | kind | served by |
|---|---|---|
| ``smollm2`` | chat | llama.cpp (``python -m llama_cpp.server``) with SmolLM2-135M-Instruct |
| ``tts-local`` | speech | ``parley engine serve`` (eSpeak NG), the catalogue ``voices.yaml`` |
| ``stt-local`` | transcription | ``parley engine serve`` (PocketSphinx, US English) |
| ``realtime-local`` | realtime | Parley itself: a cascade of the three above |

``realtime-local`` is a voice agent that runs offline: ``/v1/realtime`` sessions that
Parley speaks itself, hearing each turn with ``stt-local``, answering with ``smollm2``
and speaking with ``tts-local`` (``api/cascade.py``). Capabilities ``LLM_CHAT``,
``TTS`` and ``STT`` name the first three. The prices are small but not
zero, so the usage endpoints show what metering does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHAT_MODEL = "smollm2"
SPEECH_MODEL = "tts-local"
TRANSCRIPTION_MODEL = "stt-local"
REALTIME_MODEL = "realtime-local"
VOICE = "en-f2"
CATALOGUE = Path(__file__).resolve().parent / "voices.yaml"


def demo_config(
    workdir: Path, chat_url: str, engine_url: str, host: str | None = None, port: int | None = None
) -> dict[str, Any]:
    """Settings (as a dict) for a gateway in front of the two local engines (and the
    realtime cascade over them); the address
    is the default (127.0.0.1:8080) unless given."""
    server = {"host": host, "port": port}
    return {
        "server": {name: value for name, value in server.items() if value is not None},
        "database": {"url": f"sqlite:///{workdir / 'parley.db'}"},
        "usage": {"spill_dir": str(workdir)},
        "channels": [
            _channel("llama-cpp", "openai", chat_url, CHAT_MODEL, CHAT_MODEL),
            _channel("local-speech", "openai-audio", engine_url, SPEECH_MODEL, "espeak-ng"),
            _channel("local-stt", "openai", engine_url, TRANSCRIPTION_MODEL, "pocketsphinx-en-us"),
        ],
        "models": [
            {
                "name": CHAT_MODEL,
                "kind": "chat",
                "context_window": 2048,
                "prices": {"input_per_1k": "0.0001", "output_per_1k": "0.0002"},
            },
            {
                "name": SPEECH_MODEL,
                "kind": "speech",
                "prices": {"per_1k_characters": "0.001"},
                "audio": {
                    "voices_catalogue": str(CATALOGUE),
                    "default_voice": VOICE,
                    "status_on_every_voice": True,
                    "sample_rate": 24000,
                },
            },
            {
                "name": TRANSCRIPTION_MODEL,
                "kind": "transcription",
                "prices": {"per_minute": "0.001"},
                "transcription": {"translate": True, "stream": True},
            },
            {
                "name": REALTIME_MODEL,
                "kind": "realtime",
                "cascade": {
                    "transcription": TRANSCRIPTION_MODEL,
                    "chat": CHAT_MODEL,
                    "speech": SPEECH_MODEL,
                    "voice": VOICE,
                },
            },
        ],
        "capabilities": {"LLM_CHAT": CHAT_MODEL, "TTS": SPEECH_MODEL, "STT": TRANSCRIPTION_MODEL},
    }


def _channel(name: str, kind: str, url: str, model: str, upstream: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "base_url": url,
        "models": [{"name": model, "upstream": upstream}],
        "timeouts": {"connect": 5, "read": 300},
    }
