"""The contract of the hosted voice providers' ``Speech`` and ``Voices`` adapters: the same
cases against ElevenLabs and Cartesia, each over HTTP against its fake
(``tests/upstreams/elevenlabs.py``, ``cartesia.py``), which checks every request's shape.

Plain and streamed speech in every format Parley asks for, speed and rate mapping,
clone/list/delete with the engine's own voice ids kept apart from its built-in voices,
error answers (the key refused, the request refused, a busy engine's retry hint, a key
echoed back), timeouts and a reply cut midway.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import av
import pytest

from parley.errors import (
    InvalidRequest,
    UpstreamError,
    UpstreamRefused,
    UpstreamRejected,
    UpstreamTimeout,
)
from parley.http import HttpClient
from parley.providers.base import SPEECH, VOICES, SpeechAudio, SpeechRequest, Target, VoiceClip
from parley.providers.registry import ProviderRegistry
from tests.upstreams import CONNECT_SECONDS
from tests.upstreams.cartesia import FakeCartesia
from tests.upstreams.elevenlabs import FakeElevenLabs
from tests.upstreams.server import FakeServer
from tests.upstreams.tones import encoded, sine

KEY = "sk_live_0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class Provider:
    """One provider under the contract: its channel type, fake and request shapes."""

    kind: str
    fake: Callable[..., FakeServer]
    model: str
    voice: str
    """A built-in voice of the fake's."""
    stream_path: str
    plain_path: str

    @property
    def raw_pcm_path(self) -> str:
        """Where raw PCM is asked for: ElevenLabs' streaming form, Cartesia's bytes."""
        return self.stream_path if self.kind == "elevenlabs" else self.plain_path

    def engine(self, **knobs: Any) -> AbstractAsyncContextManager[Any]:
        return self.fake(api_key=KEY, **knobs)

    def target(self, engine: FakeServer, read_timeout: float = 5.0) -> Target:
        return Target("voice", engine.endpoint, KEY, self.model, CONNECT_SECONDS, read_timeout)

    def speed_sent(self, body: dict[str, Any]) -> float | None:
        if self.kind == "elevenlabs":
            return float(body["voice_settings"]["speed"])
        config = body.get("generation_config")
        return float(config["speed"]) if config else None

    def rate_sent(self, engine: Any) -> int:
        if self.kind == "elevenlabs":
            return int(engine.output_formats[-1].split("_")[1])
        return int(engine.last_request.body["output_format"]["sample_rate"])


ELEVENLABS = Provider(
    "elevenlabs",
    FakeElevenLabs,
    "eleven_multilingual_v2",
    "JBFqnCBsd6RMkjVDRZzb",
    "/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb/stream",
    "/v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb",
)
CARTESIA = Provider(
    "cartesia",
    FakeCartesia,
    "sonic-2",
    "694f9389-aac1-45b6-b726-9d9369183238",
    "/tts/sse",
    "/tts/bytes",
)
PROVIDERS = [pytest.param(ELEVENLABS, id="elevenlabs"), pytest.param(CARTESIA, id="cartesia")]


@pytest.fixture
async def http() -> AsyncIterator[HttpClient]:
    client = HttpClient()
    yield client
    await client.close()


@pytest.fixture
def registry(http: HttpClient) -> ProviderRegistry:
    return ProviderRegistry.default(http)


def asking(provider: Provider, fmt: str = "pcm", **fields: Any) -> SpeechRequest:
    values: dict[str, Any] = {"input": "hello there, how are you", "voice": provider.voice}
    values.update(fields)
    return SpeechRequest(response_format=fmt, **values)


async def spoken(
    registry: ProviderRegistry, provider: Provider, to: Target, request: SpeechRequest
) -> tuple[SpeechAudio, bytes]:
    async with registry.serving(SPEECH, provider.kind).speech(to, request) as audio:
        pieces = [piece async for piece in audio.pieces]
    assert pieces and all(pieces), "audio comes in pieces, never an empty one"
    return audio, b"".join(pieces)


def mp3_seconds(data: bytes) -> float:
    with av.open(io.BytesIO(data), mode="r") as container:
        assert container.format.name == "mp3"
        frames = list(container.decode(audio=0))
    return sum(frame.samples for frame in frames) / frames[0].sample_rate


# speech


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fmt", ["pcm", "wav"])
async def test_pcm_and_wav_are_asked_as_16_bit_pcm_at_the_models_rate(
    registry: ProviderRegistry, provider: Provider, fmt: str
) -> None:
    request = asking(provider, fmt, sample_rate=16000)
    async with provider.engine() as engine:
        audio, body = await spoken(registry, provider, provider.target(engine), request)
        sent = engine.last_request
    assert sent.path == provider.raw_pcm_path and provider.rate_sent(engine) == 16000
    assert audio.format == "pcm" and audio.sample_rate == 16000 and not audio.streamed_events
    seconds = len(request.input) * 0.02
    assert len(body) == round(seconds * 16000) * 2  # every sample, 16-bit mono


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_rate_the_engine_does_not_offer_is_the_nearest_it_does(
    registry: ProviderRegistry, provider: Provider
) -> None:
    async with provider.engine() as engine:
        audio, _ = await spoken(
            registry, provider, provider.target(engine), asking(provider, sample_rate=44000)
        )
        assert provider.rate_sent(engine) == 44100
    assert audio.sample_rate == 44100


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_mp3_is_made_by_the_engine_as_a_whole_file(
    registry: ProviderRegistry, provider: Provider
) -> None:
    request = asking(provider, "mp3")
    async with provider.engine() as engine:
        audio, body = await spoken(registry, provider, provider.target(engine), request)
        assert engine.last_request.path == provider.plain_path
    assert audio.format == "mp3" and audio.sample_rate == 44100
    assert mp3_seconds(body) == pytest.approx(len(request.input) * 0.02, abs=0.06)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_streamed_speech_comes_from_the_streaming_endpoint_piece_by_piece(
    registry: ProviderRegistry, provider: Provider
) -> None:
    request = asking(provider, "pcm", sse=True, sample_rate=24000)
    async with (
        provider.engine() as engine,
        registry.serving(SPEECH, provider.kind).speech(provider.target(engine), request) as audio,
    ):
        pieces = [piece async for piece in audio.pieces]
        assert engine.last_request.path == provider.stream_path
    assert len(pieces) > 3 and all(pieces)
    assert audio.format == "pcm" and audio.sample_rate == 24000
    assert len(b"".join(pieces)) == round(len(request.input) * 0.02 * 24000) * 2


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("speed", "sent"), [(1.1, 1.1), (0.25, 0.7), (4.0, 1.2)])
async def test_speed_is_sent_within_the_engines_range(
    registry: ProviderRegistry, provider: Provider, speed: float, sent: float
) -> None:
    low, high = (0.7, 1.2) if provider.kind == "elevenlabs" else (0.6, 1.5)
    expected = min(high, max(low, speed))
    async with provider.engine() as engine:
        await spoken(
            registry, provider, provider.target(engine), asking(provider, "pcm", speed=speed)
        )
        assert provider.speed_sent(engine.last_request.body) == pytest.approx(expected)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_channels_upstream_model_and_the_voice_are_sent(
    registry: ProviderRegistry, provider: Provider
) -> None:
    async with provider.engine() as engine:
        await spoken(registry, provider, provider.target(engine), asking(provider))
        body = engine.last_request.body
    if provider.kind == "elevenlabs":
        assert body["model_id"] == "eleven_multilingual_v2" and "language_code" not in body
        assert body["text"] == "hello there, how are you"
    else:
        assert body["model_id"] == "sonic-2" and body["transcript"] == "hello there, how are you"
        assert body["voice"] == {"mode": "id", "id": provider.voice}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_call_without_a_voice_speaks_the_first_builtin_one(
    registry: ProviderRegistry, provider: Provider
) -> None:
    async with provider.engine() as engine:
        await spoken(registry, provider, provider.target(engine), asking(provider, voice=None))
        listing, synthesis = engine.requests
    assert listing.method == "GET" and synthesis.path == provider.raw_pcm_path


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_call_without_a_voice_to_an_account_without_one_is_refused(
    registry: ProviderRegistry, provider: Provider
) -> None:
    async with provider.engine() as engine:
        engine.voices.clear()
        with pytest.raises(InvalidRequest) as refused:
            async with registry.serving(SPEECH, provider.kind).speech(
                provider.target(engine), asking(provider, voice=None)
            ):
                pass
        assert [request.method for request in engine.requests] == ["GET"]
    assert refused.value.param == "voice"


# voices


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_clones_are_made_listed_apart_from_builtin_voices_and_deleted(
    registry: ProviderRegistry, provider: Provider
) -> None:
    voices = registry.serving(VOICES, provider.kind)
    sample = encoded(sine(4, 16000), 16000, "mp3")
    clip = VoiceClip("g7__anna", sample, "audio/mpeg", "consent-123")
    async with provider.engine() as engine:
        where = provider.target(engine)
        before = await voices.list_voices(where)
        engine_id = await voices.create_voice(where, clip)
        after = await voices.list_voices(where)
        made = engine.voices[engine_id]
        assert made["name"] == "g7__anna" and "consent-123" in made["description"]
        assert (engine.samples if provider.kind == "elevenlabs" else engine.clips)[
            engine_id
        ] == sample
        assert await voices.delete_voice(where, engine_id) is True
        assert await voices.delete_voice(where, engine_id) is False
        assert engine_id not in engine.voices
    assert provider.voice in before.builtin and before.uploaded == ()
    assert engine_id not in after.builtin and after.uploaded == (engine_id,)
    assert len(before.builtin) == len(engine.voices) > engine.page_cap  # read page by page


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_voices_made_in_the_account_by_others_are_never_builtin(
    registry: ProviderRegistry, provider: Provider
) -> None:
    async with provider.engine() as engine:
        if provider.kind == "elevenlabs":
            engine.voices["own1"] = {"voice_id": "own1", "name": "Mine", "category": "generated"}
            engine.voices["pub1"] = {"voice_id": "pub1", "name": "g3__x", "category": "premade"}
        else:
            engine.voices["own1"] = {"id": "own1", "name": "Mine", "is_owner": True}
            engine.voices["pub1"] = {"id": "pub1", "name": "G3__x", "is_owner": False}
        listed = await registry.serving(VOICES, provider.kind).list_voices(provider.target(engine))
    assert "own1" not in listed.builtin and "pub1" not in listed.builtin
    assert set(listed.uploaded) == {"own1", "pub1"}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_clip_the_engine_refuses_is_relayed(
    registry: ProviderRegistry, provider: Provider
) -> None:
    clip = VoiceClip("g7__short", b"RIFF" + bytes(100), "audio/wav", "c")
    async with provider.engine() as engine:
        with pytest.raises(UpstreamRejected) as refused:
            await registry.serving(VOICES, provider.kind).create_voice(
                provider.target(engine), clip
            )
    assert refused.value.status == 400 and "too short" in refused.value.message


# errors


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_refused_key_is_the_channels_fault_never_relayed(
    registry: ProviderRegistry, provider: Provider
) -> None:
    async with provider.engine() as engine:
        wrong = Target("voice", engine.endpoint, "sk_wrong", provider.model, CONNECT_SECONDS, 5.0)
        with pytest.raises(UpstreamRefused) as refused:
            async with registry.serving(SPEECH, provider.kind).speech(wrong, asking(provider)):
                pass
        with pytest.raises(UpstreamRefused) as listing:
            await registry.serving(VOICES, provider.kind).list_voices(wrong)
    for error in (refused.value, listing.value):
        assert error.retryable and error.upstream_status == 401 and error.status == 502
        assert "sk_wrong" not in error.message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_refused_request_relays_the_engines_message_and_code(
    registry: ProviderRegistry, provider: Provider
) -> None:
    async with provider.engine() as engine:
        with pytest.raises(UpstreamRejected) as refused:
            async with registry.serving(SPEECH, provider.kind).speech(
                provider.target(engine), asking(provider, input="   ")
            ):
                pass
    assert refused.value.status == 400 and "empty" in refused.value.message
    assert refused.value.code == ("empty_text" if provider.kind == "elevenlabs" else None)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_busy_engines_retry_hint_is_kept_for_the_breaker(
    registry: ProviderRegistry, provider: Provider
) -> None:
    async with provider.engine(busy=429, busy_retry_after=17) as engine:
        with pytest.raises(UpstreamRefused) as refused:
            async with registry.serving(SPEECH, provider.kind).speech(
                provider.target(engine), asking(provider)
            ):
                pass
    assert refused.value.retryable and refused.value.retry_after == 17.0


async def test_a_key_echoed_in_an_error_is_redacted(registry: ProviderRegistry) -> None:
    async with ELEVENLABS.engine(echo_key_in_errors=True) as engine:
        with pytest.raises(UpstreamRejected) as refused:
            async with registry.serving(SPEECH, "elevenlabs").speech(
                ELEVENLABS.target(engine), asking(ELEVENLABS, input=" ")
            ):
                pass
    assert KEY not in refused.value.message and "[redacted]" in refused.value.message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_engine_that_does_not_answer_in_time_is_a_timeout(
    registry: ProviderRegistry, provider: Provider
) -> None:
    async with provider.engine(delay=1.0) as engine:
        with pytest.raises(UpstreamTimeout):
            async with registry.serving(SPEECH, provider.kind).speech(
                provider.target(engine, read_timeout=0.2), asking(provider)
            ):
                pass


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("sse", [False, True])
async def test_a_reply_cut_midway_is_an_upstream_failure(
    registry: ProviderRegistry, provider: Provider, sse: bool
) -> None:
    async with (
        provider.engine(drop_after=2) as engine,
        registry.serving(SPEECH, provider.kind).speech(
            provider.target(engine), asking(provider, input="y" * 200, sse=sse)
        ) as audio,
    ):
        with pytest.raises(UpstreamError):
            async for _ in audio.pieces:
                pass


async def test_cartesia_error_events_fail_the_stream_after_its_audio(
    registry: ProviderRegistry,
) -> None:
    request = asking(CARTESIA, input="x" * 100, sse=True)
    async with (
        CARTESIA.engine(error_after=2) as engine,
        registry.serving(SPEECH, "cartesia").speech(CARTESIA.target(engine), request) as audio,
    ):
        got = [await anext(audio.pieces), await anext(audio.pieces)]
        with pytest.raises(UpstreamError) as failed:
            await anext(audio.pieces)
    assert all(got) and failed.value.status == 502


async def test_cartesias_json_errors_relay_their_error_code(registry: ProviderRegistry) -> None:
    async with CARTESIA.engine(json_errors=True) as engine:
        with pytest.raises(UpstreamRejected) as refused:
            async with registry.serving(SPEECH, "cartesia").speech(
                CARTESIA.target(engine), asking(CARTESIA, input=" ")
            ):
                pass
    assert refused.value.code == "invalid_request"
    assert refused.value.message == "transcript must not be empty."


@pytest.mark.parametrize(
    ("model", "sent"), [("eleven_flash_v2_5", True), ("eleven_multilingual_v2", False)]
)
async def test_elevenlabs_is_sent_the_voices_language_only_where_the_model_takes_it(
    registry: ProviderRegistry, model: str, sent: bool
) -> None:
    async with ELEVENLABS.engine() as engine:
        to = Target("voice", engine.endpoint, KEY, model, CONNECT_SECONDS, 5.0)
        await spoken(registry, ELEVENLABS, to, asking(ELEVENLABS, language="tr"))
        body = engine.last_request.body
    assert body.get("language_code") == ("tr" if sent else None)


async def test_cartesia_is_sent_the_voices_language(registry: ProviderRegistry) -> None:
    async with CARTESIA.engine() as engine:
        await spoken(registry, CARTESIA, CARTESIA.target(engine), asking(CARTESIA, language="de"))
        assert engine.last_request.body["language"] == "de"
        assert "generation_config" not in engine.last_request.body  # speed 1: left out
