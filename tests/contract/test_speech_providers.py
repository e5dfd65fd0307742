"""The contract of the ``Speech`` and ``Voices`` adapters, each against its fake engine over HTTP.

``openai-audio`` runs against a vLLM-Omni style engine and a plain (Kokoro / tts-1 style)
one; ``supertonic`` against the Supertonic server; ``deepgram`` against the fake Deepgram
(Aura's ``speak`` and the ``models`` listing).
"""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import AsyncIterator

import av
import pytest

from parley.catalog_settings import DeepgramOptions
from parley.errors import UpstreamError, UpstreamRefused, UpstreamTimeout
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
from tests.upstreams import CONNECT_SECONDS
from tests.upstreams.deepgram import FakeDeepgram
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
    return Target("tts", base_url, "sk-channel", model, CONNECT_SECONDS, 5.0)


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


# deepgram

DG_KEY = "dg0123456789abcdef0123456789abcdef01234567"


def aura(base_url: str, model: str = "aura-2-thalia-en", rate: int = 24000) -> Target:
    options = DeepgramOptions(sample_rate=rate)  # type: ignore[arg-type]
    return Target("aura", base_url, DG_KEY, model, CONNECT_SECONDS, 5.0, options=options)


def decoded_seconds(data: bytes) -> float:
    with av.open(io.BytesIO(data)) as container:
        return sum(frame.samples / frame.sample_rate for frame in container.decode(audio=0))


async def test_aura_speaks_wav_by_default_with_the_token_and_only_the_text(
    registry: ProviderRegistry,
) -> None:
    async with FakeDeepgram(api_key=DG_KEY) as engine:
        audio, body = await spoken(registry, "deepgram", aura(engine.base_url), HELLO)
        sent = engine.speeches[-1]
    assert sent.headers["Authorization"] == f"Token {DG_KEY}"
    assert sent.body == {"text": HELLO.input}
    assert dict(sent.query) == {
        "model": "aura-2-thalia-en",
        "encoding": "linear16",
        "sample_rate": "24000",
        "container": "wav",
    }
    assert audio.format == "wav" and audio.sample_rate == 24000 and not audio.streamed_events
    assert body[:4] == b"RIFF" and decoded_seconds(body) == pytest.approx(len(HELLO.input) * 0.02)


@pytest.mark.parametrize(
    ("fmt", "encoding", "container"),
    [
        ("mp3", "mp3", None),
        ("opus", "opus", "ogg"),
        ("flac", "flac", None),
        ("aac", "aac", None),
        ("pcm", "linear16", "none"),
    ],
)
async def test_aura_makes_every_openai_format(
    registry: ProviderRegistry, fmt: str, encoding: str, container: str | None
) -> None:
    request = SpeechRequest(input="x" * 50, voice="aura-2-apollo-en", response_format=fmt)
    async with FakeDeepgram(api_key=DG_KEY) as engine:
        audio, body = await spoken(registry, "deepgram", aura(engine.base_url, rate=16000), request)
        query = engine.speeches[-1].query
    assert (query["model"], query["encoding"], query.get("container")) == (
        "aura-2-apollo-en",
        encoding,
        container,
    )
    assert audio.format == fmt
    if fmt == "pcm":  # raw 16-bit mono at the channel's rate: nothing to decode
        assert query["sample_rate"] == "16000" and audio.sample_rate == 16000
        assert len(body) == 16000 * 2 * 1.0
    else:
        assert "sample_rate" not in query and audio.sample_rate is None
        assert decoded_seconds(body) == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize(("speed", "sent"), [(4.0, "1.5"), (0.25, "0.7"), (1.2, "1.2")])
async def test_aura_speed_is_clamped_to_its_range(
    registry: ProviderRegistry, speed: float, sent: str
) -> None:
    request = SpeechRequest(input="hello", voice=None, response_format="mp3", speed=speed)
    async with FakeDeepgram(api_key=DG_KEY) as engine:
        await spoken(registry, "deepgram", aura(engine.base_url), request)
        assert engine.speeches[-1].query["speed"] == sent
        await spoken(registry, "deepgram", aura(engine.base_url), HELLO)
        assert "speed" not in engine.speeches[-1].query


async def test_aura_refusals_relay_deepgrams_message_and_failures_fall_over(
    registry: ProviderRegistry,
) -> None:
    adapter = registry.serving(SPEECH, "deepgram")
    unknown = SpeechRequest(input="hi", voice="aura-9-nobody-en", response_format="mp3")
    long = SpeechRequest(input="x" * 2001, voice=None, response_format="mp3")
    async with FakeDeepgram(api_key=DG_KEY) as engine:
        with pytest.raises(UpstreamRefused) as refused:
            async with adapter.speech(aura(engine.base_url), unknown):
                pass
        with pytest.raises(UpstreamRefused) as too_long:
            async with adapter.speech(aura(engine.base_url), long):
                pass
        with pytest.raises(UpstreamRefused) as busy:
            busy_model = "aura-2-thalia-en+fail-429+retry-after-4"
            async with adapter.speech(aura(engine.base_url, busy_model), HELLO):
                pass
    assert refused.value.status == 400 and not refused.value.retryable
    assert refused.value.message == "No such model: aura-9-nobody-en"
    assert too_long.value.status == 413
    assert busy.value.retryable and busy.value.retry_after == 4.0


async def test_aura_sse_is_left_to_parley_and_silence_is_a_timeout(
    registry: ProviderRegistry,
) -> None:
    request = SpeechRequest(input="hello", voice=None, response_format="pcm", sse=True)
    async with FakeDeepgram(api_key=DG_KEY) as engine:
        audio, body = await spoken(registry, "deepgram", aura(engine.base_url), request)
        assert not audio.streamed_events and len(body) == 24000 * 2 * 0.4  # Aura's bytes
        slow = Target(
            "aura", engine.base_url, DG_KEY, "aura-2-thalia-en+hang-5", CONNECT_SECONDS, 0.3
        )
        with pytest.raises(UpstreamTimeout):
            async with registry.serving(SPEECH, "deepgram").speech(slow, HELLO):
                pass


async def test_aura_audio_cut_midway_is_an_upstream_failure(registry: ProviderRegistry) -> None:
    async with FakeDeepgram(api_key=DG_KEY) as engine:
        speaking = registry.serving(SPEECH, "deepgram").speech(
            aura(engine.base_url, "aura-2-thalia-en+drop-after-2"), HELLO
        )
        async with speaking as audio:
            with pytest.raises(UpstreamError):
                await collect(audio)


async def test_aura_voices_are_its_models_and_it_cannot_clone(
    registry: ProviderRegistry,
) -> None:
    voices = registry.serving(VOICES, "deepgram")
    async with FakeDeepgram(api_key=DG_KEY) as engine:
        listed = await voices.list_voices(aura(engine.base_url))
        with pytest.raises(VoicesUnsupported):
            await voices.create_voice(
                aura(engine.base_url), VoiceClip("g7__anna", b"", "audio/wav", "parley")
            )
        assert await voices.delete_voice(aura(engine.base_url), "g7__anna") is False
        with pytest.raises(UpstreamRefused) as unauthorized:
            wrong = Target(
                "aura", engine.base_url, "dg-wrong", "aura-2-thalia-en", CONNECT_SECONDS, 5.0
            )
            await voices.list_voices(wrong)
    assert listed.builtin[:3] == ("aura-2-thalia-en", "aura-2-andromeda-en", "aura-2-apollo-en")
    assert listed.uploaded == ()
    assert unauthorized.value.upstream_status == 401 and unauthorized.value.retryable


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
    async with FakeDeepgram(api_key=DG_KEY) as deepgram:
        with pytest.raises(UpstreamError, match="larger than Parley accepts"):
            await tight.serving(VOICES, "deepgram").list_voices(aura(deepgram.base_url))
