"""/v1/models and /v1/capabilities list the speech models with their kind and options."""

from __future__ import annotations

from tests.api.speech.conftest import Tenants


async def test_models_show_each_speech_models_options(tenants: Tenants) -> None:
    client = tenants.gateway.client(tenants.key_a)
    listing = await client.models.list()
    models = {model.id: model.model_dump() for model in listing.data}
    pro, fast, plain = models["tts-pro"], models["tts-fast"], models["tts-plain"]
    assert pro["kind"] == "speech" and pro["endpoints"] == ["/v1/audio/speech"]
    assert pro["pricing"]["per_1k_characters"] == 0.015
    assert pro["speech"] == {
        "formats": ["mp3", "pcm", "wav"],
        "unsupported_formats": "reject",
        "quality": [],
        "instruction": True,
        "voices": True,
        "cloning": True,
        "transcript_cloning": True,
        "max_input_chars": 500,
        "pcm_sample_rate": 24000,
        "streaming": ["audio", "sse"],
    }
    assert fast["speech"]["quality"] == ["high", "max", "standard"]
    assert fast["speech"]["unsupported_formats"] == "wav"
    assert fast["speech"]["pcm_sample_rate"] == 44100
    assert plain["speech"]["voices"] is False and plain["speech"]["cloning"] is False
    assert "speech" not in models["chat-large"]


async def test_capabilities_show_the_speech_options(tenants: Tenants) -> None:
    client = tenants.gateway.client(tenants.key_a)
    reply = await client.get("/capabilities", cast_to=dict)
    entry = next(item for item in reply["data"] if item["key"] == "TTS_PRO")
    assert entry["kind"] == "speech" and entry["speech"]["cloning"] is True
