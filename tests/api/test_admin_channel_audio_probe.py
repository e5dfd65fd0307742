"""The channel test button for speech and transcription models: one minimal real call
to the fake audio engines (a short word spoken, half a second of silence transcribed),
with its status, its latency and the upstream's error, redacted of the credential."""

from __future__ import annotations

import io
import wave
from typing import Any

from cryptography.fernet import Fernet

from tests.api.admin_client import ADMIN, call
from tests.api.harness import Gateway
from tests.upstreams.cartesia import FakeCartesia
from tests.upstreams.elevenlabs import FakeElevenLabs
from tests.upstreams.openai_audio import FakeAudioEngine
from tests.upstreams.supertonic import FakeSupertonic
from tests.upstreams.transcribers import FakeTranscriber

SECRET_KEY = Fernet.generate_key().decode()
VOICE_KEY = "sk-voice-channel-credential-31"
EARS_KEY = "sk-ears-channel-credential-47"
WRONG_KEY = "sk-wrong-channel-credential-99"


async def audio_gateway(start_gateway: Any) -> Gateway:
    def tweak(config: dict[str, Any]) -> None:
        config["admin"] = {"token": ADMIN, "secret_keys": [SECRET_KEY]}
        config["models"] += [
            {"name": "tts-live", "kind": "speech"},
            {"name": "stt-live", "kind": "transcription"},
        ]

    gateway: Gateway = await start_gateway(tweak)
    return gateway


def channel(name: str, type_: str, engine: Any, key: str | None, model: str, upstream: str) -> Any:
    body = {"name": name, "type": type_, "base_url": engine.base_url, "api_key": key}
    return {**body, "models": [{"name": model, "upstream": upstream}]}


async def press_test(gateway: Gateway, name: str) -> dict[str, Any]:
    status, result = await call(gateway, "POST", f"/admin/channels/{name}/test")
    assert status == 200, result
    return dict(result)


async def change(gateway: Gateway, name: str, **fields: Any) -> None:
    status, result = await call(gateway, "PATCH", f"/admin/channels/{name}", body=fields)
    assert status == 200, result


def unseen(message: str, *keys: str) -> bool:
    return not any(key in message or key[3:] in message for key in keys)


async def test_a_speech_channel_is_tested_with_one_short_synthesis(start_gateway: Any) -> None:
    gateway = await audio_gateway(start_gateway)
    async with FakeAudioEngine(api_key=VOICE_KEY, leak=True) as engine:
        body = channel("voice", "openai-audio", engine, VOICE_KEY, "tts-live", "qwen3-tts")
        assert (await call(gateway, "POST", "/admin/channels", body=body))[0] == 201

        result = await press_test(gateway, "voice")
        assert (result["ok"], result["status"], result["model"]) == (True, 200, "tts-live")
        assert isinstance(result["latency_ms"], int) and result["latency_ms"] >= 0
        assert result["message"] is None
        (sent,) = engine.requests
        assert sent.path == "/v1/audio/speech"
        assert sent.body["model"] == "qwen3-tts" and sent.body["input"] == "OK."

        await change(gateway, "voice", api_key=WRONG_KEY)
        result = await press_test(gateway, "voice")
        assert (result["ok"], result["status"]) == (False, 401)
        assert result["message"].startswith("Incorrect API key provided.")
        assert "[redacted]" in result["message"] and unseen(result["message"], WRONG_KEY)
        assert "Bearer" in engine.requests[-1].headers["Authorization"]  # it was quoted back

        await change(
            gateway, "voice", api_key=VOICE_KEY, models=[{"name": "tts-live", "upstream": "nope"}]
        )
        result = await press_test(gateway, "voice")
        assert (result["ok"], result["status"]) == (False, 404)
        assert "The model `nope` does not exist." in result["message"]
        assert unseen(result["message"], VOICE_KEY)

    status, history = await call(gateway, "GET", "/admin/channels/voice/history")
    assert status == 200
    outcomes = [(e["kind"], e["model"], e["state"], e["status"]) for e in history["data"]]
    assert outcomes == [
        ("test", "tts-live", "failed", 404),
        ("test", "tts-live", "failed", 401),
        ("test", "tts-live", "ok", 200),
    ]
    assert all(unseen(str(e), VOICE_KEY, WRONG_KEY) for e in history["data"])


async def test_a_transcription_channel_is_tested_with_half_a_second_of_silence(
    start_gateway: Any,
) -> None:
    gateway = await audio_gateway(start_gateway)
    async with FakeTranscriber("openai", api_key=EARS_KEY, leak=True) as engine:
        body = channel("ears", "openai", engine, EARS_KEY, "stt-live", "whisper-1+hang-0.3")
        assert (await call(gateway, "POST", "/admin/channels", body=body))[0] == 201

        result = await press_test(gateway, "ears")
        assert (result["ok"], result["status"], result["model"]) == (True, 200, "stt-live")
        assert 300 <= result["latency_ms"] < 10_000  # the engine's 0.3 s, measured
        upload = engine.last
        assert upload.path == "/v1/audio/transcriptions"
        assert upload.fields["model"] == "whisper-1+hang-0.3" and upload.file is not None
        with wave.open(io.BytesIO(upload.file)) as clip:
            assert clip.getnframes() / clip.getframerate() == 0.5

        failing = [{"name": "stt-live", "upstream": "whisper-1+fail-503"}]
        await change(gateway, "ears", models=failing)
        result = await press_test(gateway, "ears")
        assert (result["ok"], result["status"]) == (False, 503)
        assert result["message"].startswith("Fake engine failure (status 503).")
        assert "[redacted]" in result["message"] and unseen(result["message"], EARS_KEY)
        assert result["latency_ms"] < 300

        await change(gateway, "ears", api_key=WRONG_KEY)
        result = await press_test(gateway, "ears")
        assert (result["ok"], result["status"]) == (False, 401)
        assert "Incorrect API key provided." in result["message"]
        assert unseen(result["message"], WRONG_KEY, EARS_KEY)


async def test_an_engine_with_its_own_error_shape_is_reported_as_it_said(
    start_gateway: Any,
) -> None:
    gateway = await audio_gateway(start_gateway)
    async with FakeTranscriber("speaches") as engine:
        upstream = "Systran/faster-whisper-small+fail-500"
        body = channel("speaches", "speaches", engine, None, "stt-live", upstream)
        assert (await call(gateway, "POST", "/admin/channels", body=body))[0] == 201
        result = await press_test(gateway, "speaches")
        assert (result["ok"], result["status"]) == (False, 500)
        assert "Fake engine failure (status 500)." in result["message"]

        await change(gateway, "speaches", models=[{"name": "stt-live", "upstream": "whisper"}])
        result = await press_test(gateway, "speaches")
        assert result["ok"] and result["status"] == 200, result
        assert engine.last.fields["model"] == "whisper"


async def test_every_speech_and_transcription_channel_type_answers_the_probe(
    start_gateway: Any,
) -> None:
    gateway = await audio_gateway(start_gateway)
    async with (
        FakeSupertonic() as tonic,
        FakeAudioEngine.plain() as kokoro,
        FakeTranscriber("vllm") as vllm,
    ):
        channels = [
            channel("tonic", "supertonic", tonic, None, "tts-live", "supertonic"),
            channel("kokoro", "openai-audio", kokoro, None, "tts-live", "kokoro"),
            channel("vllm", "vllm", vllm, None, "stt-live", "openai/whisper-large-v3"),
        ]
        for body in channels:
            assert (await call(gateway, "POST", "/admin/channels", body=body))[0] == 201
        for body in channels:
            result = await press_test(gateway, body["name"])
            assert (result["ok"], result["status"]) == (True, 200), (body["name"], result)
        assert tonic.last_body["text"] == "OK." and tonic.last_body["response_format"] == "wav"
        assert kokoro.requests[-1].body["response_format"] == "wav"
        assert vllm.last.fields["model"] == "openai/whisper-large-v3"


async def test_hosted_voice_channels_are_tested_with_one_short_synthesis(
    start_gateway: Any,
) -> None:
    gateway = await audio_gateway(start_gateway)
    eleven_key, cartesia_key = "sk_" + "ab12" * 12, "sk_car_" + "Cd34" * 6
    async with (
        FakeElevenLabs(api_key=eleven_key) as eleven,
        FakeCartesia(api_key=cartesia_key) as cartesia,
    ):
        for name, type_, engine, key, upstream in (
            ("eleven", "elevenlabs", eleven, eleven_key, "eleven_multilingual_v2"),
            ("sonic", "cartesia", cartesia, cartesia_key, "sonic-2"),
        ):
            body = channel(name, type_, engine, key, "tts-live", upstream)
            body["base_url"] = engine.endpoint
            assert (await call(gateway, "POST", "/admin/channels", body=body))[0] == 201
            result = await press_test(gateway, name)
            assert (result["ok"], result["status"]) == (True, 200), result
            listing, synthesis = engine.requests[-2:]  # no default voice: the first is used
            assert listing.method == "GET" and synthesis.method == "POST"

            await change(gateway, name, api_key=WRONG_KEY)
            result = await press_test(gateway, name)
            assert (result["ok"], result["status"]) == (False, 401)
            assert unseen(result["message"], WRONG_KEY, key)
