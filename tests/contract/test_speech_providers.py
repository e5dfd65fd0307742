"""The contract of the ``Speech`` and ``Voices`` adapters, each against its fake engine over HTTP.

``openai-audio`` runs against a vLLM-Omni style engine and a plain (Kokoro / tts-1 style)
one; ``supertonic`` against the Supertonic server.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import AsyncIterator

import pytest

from parley.errors import UpstreamError, UpstreamRefused
from parley.http import HttpClient
from parley.providers.base import (
    SPEECH,
    VOICES,
    ReplyBounds,
    SpeechAudio,
    SpeechRequest,
    Target,
    VoiceClip,
    VoicesUnsupported,
)
from parley.providers.registry import ProviderRegistry
from tests.upstreams.openai_audio import FakeAudioEngine
from tests.upstreams.supertonic import FakeSupertonic
from tests.upstreams.tones import encoded, sine, wav

HELLO = SpeechRequest(input="hello there, how are you", voice=None, response_format="wav")


@pytest.fixture
async def http() -> AsyncIterator[HttpClient]:
    client = HttpClient()
    yield client
    await client.close()


@pytest.fixture
def registry(http: HttpClient) -> ProviderRegistry:
    return ProviderRegistry.default(http)


def target(base_url: str, model: str = "qwen3-tts") -> Target:
    return Target("tts", base_url, "sk-channel", model, 1.0, 5.0)


async def collect(audio: SpeechAudio) -> bytes:
    pieces = [piece async for piece in audio.pieces]
    assert all(pieces), "a piece is never empty"
    return b"".join(pieces)


async def spoken(
    registry: ProviderRegistry, kind: str, to: Target, request: SpeechRequest
) -> tuple[SpeechAudio, bytes]:
    """One synthesis through the ``kind`` adapter: what it said of the audio, and every byte."""
    async with registry.serving(SPEECH, kind).speech(to, request) as audio:
        return audio, await collect(audio)


# openai-audio: speech


async def test_raw_audio_is_streamed_with_the_engines_streamed_wav_header(
    registry: ProviderRegistry,
) -> None:
    async with FakeAudioEngine() as engine:
        audio, body = await spoken(registry, "openai-audio", target(engine.base_url), HELLO)
        sent = engine.last_request.body
    assert sent["stream_format"] == "audio" and "stream" not in sent
    assert audio.format == "wav" and not audio.streamed_events
    assert body[:4] == b"RIFF" and struct.unpack("<I", body[4:8])[0] == 0xFFFFFFFF
    assert struct.unpack("<I", body[40:44])[0] == 0xFFFFFFFF


async def test_sse_events_are_decoded_into_audio_and_usage(registry: ProviderRegistry) -> None:
    request = SpeechRequest(input="one two three", voice="Ryan", response_format="pcm", sse=True)
    async with FakeAudioEngine() as engine:
        audio, body = await spoken(registry, "openai-audio", target(engine.base_url), request)
        sent = engine.last_request.body
    assert sent["stream_format"] == "sse" and sent["voice"] == "Ryan"
    assert audio.streamed_events and audio.format == "pcm"
    assert len(body) == 24000 * 2 * 0.4  # MIN_SECONDS of 16-bit mono at 24 kHz
    assert audio.usage is not None and audio.usage["input_tokens"] == 3


async def test_an_engine_that_ignores_sse_is_read_as_audio_by_its_content_type(
    registry: ProviderRegistry,
) -> None:
    request = SpeechRequest(input="hi", voice=None, response_format="wav", sse=True)
    async with FakeAudioEngine.plain() as engine:
        to = target(engine.base_url, "kokoro")
        audio, body = await spoken(registry, "openai-audio", to, request)
    assert not audio.streamed_events and audio.format == "wav" and body[:4] == b"RIFF"


async def test_a_format_that_cannot_stream_is_asked_whole_without_stream_format(
    registry: ProviderRegistry,
) -> None:
    request = SpeechRequest(input="hi", voice=None, response_format="mp3", language="en")
    async with FakeAudioEngine() as engine:
        audio, body = await spoken(registry, "openai-audio", target(engine.base_url), request)
        sent = engine.last_request.body
    assert "stream_format" not in sent and sent["language"] == "English"
    assert audio.format == "mp3" and len(body) > 100


@pytest.mark.parametrize("legacy", [False, True])
async def test_both_error_shapes_relay_the_engines_message(
    registry: ProviderRegistry, legacy: bool
) -> None:
    request = SpeechRequest(input="  ", voice=None, response_format="wav")
    async with FakeAudioEngine(legacy_errors=legacy) as engine:
        with pytest.raises(UpstreamRefused) as refused:
            async with registry.serving(SPEECH, "openai-audio").speech(
                target(engine.base_url), request
            ):
                pass
    assert refused.value.status == 400
    assert refused.value.message == "Input text cannot be empty"


async def test_an_error_event_mid_stream_is_an_upstream_failure(registry: ProviderRegistry) -> None:
    request = SpeechRequest(input="x" * 100, voice=None, response_format="pcm", sse=True)
    async with (
        FakeAudioEngine(error_after=2) as engine,
        registry.serving(SPEECH, "openai-audio").speech(target(engine.base_url), request) as audio,
    ):
        got = [await anext(audio.pieces), await anext(audio.pieces)]
        with pytest.raises(UpstreamError) as failed:
            await anext(audio.pieces)
    assert all(got) and failed.value.status == 502


async def test_a_connection_dropped_mid_audio_is_an_upstream_failure(
    registry: ProviderRegistry,
) -> None:
    adapter = registry.serving(SPEECH, "openai-audio")
    async with FakeAudioEngine(drop_after=2) as engine:
        speaking = adapter.speech(target(engine.base_url), HELLO)
        async with speaking as audio:
            with pytest.raises(UpstreamError):
                await collect(audio)


async def test_an_unreachable_engine_is_an_upstream_error(registry: ProviderRegistry) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(UpstreamError) as failed:
        async with registry.serving(SPEECH, "openai-audio").speech(
            target(f"http://127.0.0.1:{port}/v1"), HELLO
        ):
            pass
    assert "unreachable" in failed.value.message


# openai-audio: voices


async def test_voices_are_listed_cloned_lower_cased_and_deleted(registry: ProviderRegistry) -> None:
    voices = registry.serving(VOICES, "openai-audio")
    clip = VoiceClip(
        "g7__Anna", encoded(sine(3, 16000), 16000, "mp3"), "audio/mpeg", "parley", "hi"
    )
    async with FakeAudioEngine() as engine:
        where = target(engine.base_url)
        assert await voices.create_voice(where, clip) == "g7__anna"
        listed = await voices.list_voices(where)
        assert engine.uploaded["g7__anna"]["ref_text"] == "hi"
        assert await voices.delete_voice(where, "g7__anna") is True
        assert await voices.delete_voice(where, "g7__anna") is False
    assert listed.uploaded == ("g7__anna",)
    assert listed.builtin == ("vivian", "ryan", "aiden", "serena")


async def test_a_clip_the_engine_refuses_is_relayed(registry: ProviderRegistry) -> None:
    clip = VoiceClip("x", wav(sine(0.5, 16000), 16000), "audio/wav", "parley")
    async with FakeAudioEngine(legacy_errors=True) as engine:
        with pytest.raises(UpstreamRefused) as refused:
            await registry.serving(VOICES, "openai-audio").create_voice(
                target(engine.base_url), clip
            )
    assert "too short" in refused.value.message


async def test_an_engine_without_voice_management_says_so(registry: ProviderRegistry) -> None:
    async with FakeAudioEngine.plain() as engine:
        with pytest.raises(VoicesUnsupported):
            await registry.serving(VOICES, "openai-audio").list_voices(target(engine.base_url))


async def test_a_voice_list_cut_midway_is_an_upstream_error(registry: ProviderRegistry) -> None:
    async with FakeAudioEngine(drop_voice_list=True) as engine:
        with pytest.raises(UpstreamError) as failed:
            await registry.serving(VOICES, "openai-audio").list_voices(target(engine.base_url))
    assert failed.value.status == 502


# supertonic


async def test_supertonic_speaks_wav_with_steps_and_a_clamped_speed(
    registry: ProviderRegistry,
) -> None:
    request = SpeechRequest(
        input="merhaba", voice="F2", response_format="mp3", speed=4.0, steps=16, language="tr"
    )
    async with FakeSupertonic() as engine:
        audio, body = await spoken(registry, "supertonic", target(engine.base_url), request)
        sent = engine.last_body
    assert sent == {
        "text": "merhaba",
        "voice": "F2",
        "speed": 2.0,
        "steps": 16,
        "lang": "tr",
        "response_format": "wav",
    }
    assert audio.format == "wav" and audio.sample_rate == 44100 and body[:4] == b"RIFF"


async def test_supertonic_validation_errors_are_relayed(registry: ProviderRegistry) -> None:
    request = SpeechRequest(input="hi", voice=None, response_format="wav", steps=0)
    async with FakeSupertonic() as engine:
        with pytest.raises(UpstreamRefused) as refused:
            async with registry.serving(SPEECH, "supertonic").speech(
                target(engine.base_url), request
            ):
                pass
    assert refused.value.status == 422 and refused.value.message.startswith("steps:")


async def test_supertonic_lists_only_builtin_styles_and_cannot_clone(
    registry: ProviderRegistry,
) -> None:
    voices = registry.serving(VOICES, "supertonic")
    async with FakeSupertonic() as engine:
        listed = await voices.list_voices(target(engine.base_url))
        with pytest.raises(VoicesUnsupported):
            await voices.create_voice(
                target(engine.base_url), VoiceClip("a", b"", "audio/wav", "c")
            )
    assert "imported_narrator" not in listed.builtin
    assert listed.builtin[:2] == ("M1", "M2") and len(listed.builtin) == 10


async def test_engine_replies_past_the_upstream_bounds_are_upstream_errors(
    http: HttpClient,
) -> None:
    tight = ProviderRegistry.default(http, ReplyBounds(max_reply_bytes=64, max_event_bytes=64))
    request = SpeechRequest(input="one two three", voice="Ryan", response_format="pcm", sse=True)
    async with FakeAudioEngine() as engine:
        with pytest.raises(UpstreamError, match="larger than Parley accepts"):
            await tight.serving(VOICES, "openai-audio").list_voices(target(engine.base_url))
        with pytest.raises(UpstreamError, match="larger than Parley accepts"):
            async with tight.serving(SPEECH, "openai-audio").speech(
                target(engine.base_url), request
            ) as audio:
                await collect(audio)
    async with FakeSupertonic() as tonic:
        with pytest.raises(UpstreamError, match="larger than Parley accepts"):
            await tight.serving(VOICES, "supertonic").list_voices(
                target(tonic.base_url, "supertonic")
            )
