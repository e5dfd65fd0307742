"""What only the Deepgram adapter has, against the fake Deepgram over HTTP and WebSocket.

Its transcriptions also run in the shared contract (``test_transcription_providers.py``)
and its speech and voices in ``test_speech_providers.py``; here: the ``Token`` key, the
channel's ``deepgram`` settings in the query, the refusal of translations, the live
socket's framing and failures, and Deepgram's error bodies.
"""

from __future__ import annotations

import io
import socket
from collections.abc import AsyncIterator

import pytest

from parley.catalog_settings import DeepgramOptions
from parley.domain.transcripts import ResponseFormat
from parley.domain.wire import JSON
from parley.errors import (
    InvalidRequest,
    UpstreamError,
    UpstreamRefused,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from parley.http import HttpClient
from parley.providers.base import (
    AudioUpload,
    ReplyBounds,
    Target,
    Transcription,
    TranscriptionRequest,
)
from parley.providers.deepgram.live import live_url
from parley.providers.registry import ProviderRegistry
from tests.clips import clip
from tests.upstreams.deepgram import FakeDeepgram
from tests.upstreams.transcript_script import Script

KEY = "dg0123456789abcdef0123456789abcdef01234567"
CLIP = clip("mp3", 2.5)
SCRIPT = Script("transcribe", 2.5, "en", 0.0)


@pytest.fixture
async def http() -> AsyncIterator[HttpClient]:
    client = HttpClient()
    yield client
    await client.close()


@pytest.fixture
def adapter(http: HttpClient) -> Transcription:
    return ProviderRegistry.default(http).transcription("deepgram")


@pytest.fixture
async def deepgram() -> AsyncIterator[FakeDeepgram]:
    async with FakeDeepgram(api_key=KEY, leak=True) as running:
        yield running


def target(
    engine: FakeDeepgram,
    model: str = "nova-3",
    *,
    key: str | None = KEY,
    options: DeepgramOptions | None = None,
    idle: float | None = None,
) -> Target:
    return Target(
        "dg",
        engine.base_url,
        key,
        model,
        connect_timeout=2,
        read_timeout=10,
        idle_timeout=idle,
        options=options,
    )


def asking(
    fmt: ResponseFormat = "json",
    *,
    data: bytes = CLIP,
    options: tuple[tuple[str, str], ...] = (),
    task: str = "transcribe",
) -> TranscriptionRequest:
    upload = AudioUpload(io.BytesIO(data), "audio.mp3", "audio/mpeg")
    return TranscriptionRequest(task, upload, fmt, options)  # type: ignore[arg-type]


async def streamed(adapter: Transcription, to: Target, request: TranscriptionRequest) -> list[JSON]:
    events: list[JSON] = []
    async with adapter.transcribe_stream(to, request) as batches:
        async for batch in batches:
            events.extend(batch)
    return events


# files


async def test_the_key_goes_as_a_token_and_the_channel_settings_fill_the_query(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    plain = DeepgramOptions(punctuate=False, smart_format=False, language="de")
    reply = await adapter.transcribe(target(deepgram, options=plain), asking())
    received = deepgram.last
    assert received.headers["Authorization"] == f"Token {KEY}"
    assert received.fields["model"] == "nova-3"
    assert received.fields["punctuate"] == "false"
    assert received.fields["smart_format"] == "false"
    assert received.fields["language"] == "de"
    assert "utterances" not in received.fields, "json needs no segments"
    assert reply.body == {"text": "this is part 1 this is part 2 this is part 3"}


async def test_the_callers_language_and_keywords_win_over_the_channels(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    options = (("language", "fr"), ("keywords[]", "Parley"), ("keywords[]", "Aura"))
    await adapter.transcribe(
        target(deepgram, options=DeepgramOptions(language="de")), asking(options=options)
    )
    fields = deepgram.last.fields
    assert fields["language"] == "fr"
    assert fields.getall("keyterm") == ["Parley", "Aura"]
    assert fields["punctuate"] == fields["smart_format"] == "true", "the defaults"


async def test_verbose_json_words_are_punctuated_and_segments_are_utterances(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    request = TranscriptionRequest(
        "transcribe",
        AudioUpload(io.BytesIO(CLIP), "audio.mp3", "audio/mpeg"),
        "verbose_json",
        timestamp_granularities=("word",),
    )
    reply = await adapter.transcribe(target(deepgram), request)
    body = reply.body
    assert isinstance(body, dict)
    assert body["language"] == "en" and body["duration"] == 2.5
    assert "segments" not in body, "only words were asked for"
    assert [w["word"] for w in body["words"]] == [w["word"] for w in SCRIPT.words]
    assert body["words"][-1]["end"] == 2.5


async def test_a_translation_is_refused_before_anything_is_sent(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    with pytest.raises(InvalidRequest) as whole:
        await adapter.transcribe(target(deepgram), asking(task="translate"))
    with pytest.raises(InvalidRequest) as stream:
        await streamed(adapter, target(deepgram), asking(task="translate"))
    for refused in (whole.value, stream.value):
        assert refused.status == 400
        assert refused.code == "translation_not_supported"
        assert "does not translate" in refused.message
    assert deepgram.uploads == []


async def test_a_wrong_key_is_the_channels_fault_and_never_shown(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    wrong = "dg9999999999999999999999999999999999999999"
    with pytest.raises(UpstreamRefused) as refused:
        await adapter.transcribe(target(deepgram, key=wrong), asking())
    assert refused.value.retryable and refused.value.upstream_status == 401
    assert wrong not in refused.value.message
    assert wrong not in (refused.value.detail or "")


async def test_a_refusal_quoting_the_token_is_redacted(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    with pytest.raises(UpstreamRejected) as refused:
        await adapter.transcribe(target(deepgram, "nova-3+fail-400"), asking())
    assert refused.value.message.startswith("Fake engine failure (status 400).")
    assert KEY not in refused.value.message
    assert refused.value.code == "FAKE_FAILURE", "Deepgram's err_code, a plain name"


async def test_a_spent_balance_falls_over_and_a_429_keeps_its_hint(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    with pytest.raises(UpstreamRefused) as spent:
        await adapter.transcribe(target(deepgram, "nova-3+fail-402"), asking())
    assert spent.value.retryable and spent.value.upstream_status == 403
    with pytest.raises(UpstreamRefused) as busy:
        await adapter.transcribe(target(deepgram, "nova-3+fail-429+retry-after-7"), asking())
    assert busy.value.retryable and busy.value.retry_after == 7.0


# the live socket


def test_the_live_address_is_the_channels_host_as_a_websocket() -> None:
    secure = live_url("https://api.deepgram.com/v1", [("model", "nova-3")])
    assert str(secure) == "wss://api.deepgram.com/v1/listen?model=nova-3"
    assert str(live_url("http://127.0.0.1:8080/v1", [])) == "ws://127.0.0.1:8080/v1/listen"


async def test_a_stream_sends_the_file_in_frames_as_containerized_audio(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    long_clip = clip("wav", 5.0)  # 160 kB: three 64 KiB frames
    events = await streamed(
        adapter, target(deepgram, options=DeepgramOptions(language="en")), asking(data=long_clip)
    )
    received = deepgram.last
    assert received.headers["Authorization"] == f"Token {KEY}"
    assert received.fields["interim_results"] == "false"
    assert received.fields["language"] == "en"
    assert "encoding" not in received.fields and "sample_rate" not in received.fields
    assert deepgram.live_frames == 3
    script = Script("transcribe", 5.0, "en", 0.0)
    *deltas, done = events
    assert [event["delta"] for event in deltas] == [
        (" " if index else "") + segment["text"].strip()
        for index, segment in enumerate(script.segments)
    ]
    assert done == {"type": "transcript.text.done", "text": script.text}
    assert deepgram.completed_streams == 1


async def test_a_refused_handshake_is_the_status_it_carried(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    with pytest.raises(UpstreamRefused) as unauthorized:
        await streamed(adapter, target(deepgram, key="dg-wrong-key-000000"), asking())
    assert unauthorized.value.upstream_status == 401 and unauthorized.value.retryable
    with pytest.raises(UpstreamRefused) as busy:
        await streamed(adapter, target(deepgram, "nova-3+fail-429+retry-after-9"), asking())
    assert busy.value.retryable and busy.value.retry_after == 9.0


async def test_audio_deepgram_cannot_decode_closes_with_policy_and_is_the_requests_fault(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    with pytest.raises(UpstreamRejected) as refused:
        await streamed(adapter, target(deepgram), asking(data=b"RIFF\x00\x00\x00\x00WAVEjunk"))
    assert refused.value.status == 400 and not refused.value.retryable
    assert refused.value.message.startswith("DATA-0000")


async def test_a_socket_closed_midway_raises_after_what_it_delivered(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    events: list[JSON] = []
    with pytest.raises(UpstreamRefused) as failed:
        async with adapter.transcribe_stream(
            target(deepgram, "nova-3+error-after-2"), asking()
        ) as batches:
            async for batch in batches:
                events.extend(batch)
    assert [event["type"] for event in events] == ["transcript.text.delta"] * 2
    assert failed.value.status == 502 and "1011" in failed.value.message


async def test_a_silent_socket_times_out_at_the_idle_timeout(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    events: list[JSON] = []
    with pytest.raises(UpstreamTimeout):
        async with adapter.transcribe_stream(
            target(deepgram, "nova-3+stall-after-1", idle=0.3), asking()
        ) as batches:
            async for batch in batches:
                events.extend(batch)
    assert len(events) == 1


async def test_a_message_past_the_bound_is_an_upstream_error(
    http: HttpClient, deepgram: FakeDeepgram
) -> None:
    tight = ProviderRegistry.default(http, ReplyBounds(max_event_bytes=64))
    with pytest.raises(UpstreamError, match="larger than Parley accepts"):
        await streamed(tight.transcription("deepgram"), target(deepgram), asking())


async def test_an_unreachable_socket_is_unreachable(adapter: Transcription) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    nowhere = Target("dg", f"http://127.0.0.1:{port}/v1", KEY, "nova-3", 2, 10)
    with pytest.raises(UpstreamUnreachable):
        await streamed(adapter, nowhere, asking())


async def test_a_file_deepgram_takes_too_long_over_is_a_timeout(
    adapter: Transcription, deepgram: FakeDeepgram
) -> None:
    slow = Target("dg", deepgram.base_url, KEY, "nova-3+hang-5", 2, 0.3)
    with pytest.raises(UpstreamTimeout):
        await adapter.transcribe(slow, asking())
