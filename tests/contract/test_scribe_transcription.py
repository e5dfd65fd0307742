"""The ``Transcription`` contract for ElevenLabs Scribe, against its fake over HTTP.

The same shapes as every transcription adapter (``test_transcription_providers.py``):
``json`` is ``{"text"}``, ``text`` plain text, ``srt``/``vtt`` subtitles, ``verbose_json``
OpenAI's object with segments (and words when asked), a stream OpenAI's delta and done
events; plus what is Scribe's own: the form it is sent, its word items cut into segments,
its language code named, translation refused, its errors.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import pytest

from parley.domain.transcripts import ResponseFormat, Task
from parley.errors import InvalidRequest, UpstreamRefused, UpstreamRejected, UpstreamTimeout
from parley.http import HttpClient
from parley.providers.base import AudioUpload, Target, Transcription, TranscriptionRequest
from parley.providers.registry import ProviderRegistry
from tests.clips import clip
from tests.upstreams.elevenlabs import SCRIPT, FakeElevenLabs

KEY = "sk_0123456789abcdef0123456789abcdef0123456789abcdef"
CLIP = clip("mp3", 2.5)


@pytest.fixture
async def engine() -> AsyncIterator[FakeElevenLabs]:
    async with FakeElevenLabs(api_key=KEY) as running:
        yield running


@pytest.fixture
async def scribe() -> AsyncIterator[Transcription]:
    http = HttpClient()
    yield ProviderRegistry.default(http).transcription("elevenlabs")
    await http.close()


def target(engine: FakeElevenLabs, read_timeout: float = 10) -> Target:
    return Target("scribe", engine.endpoint, KEY, "scribe_v1", 2, read_timeout)


def asking(
    fmt: ResponseFormat = "json",
    task: Task = "transcribe",
    *,
    options: tuple[tuple[str, str], ...] = (),
    granularities: tuple[str, ...] = (),
) -> TranscriptionRequest:
    upload = AudioUpload(io.BytesIO(CLIP), "audio.mp3", "audio/mpeg")
    return TranscriptionRequest(task, upload, fmt, options, granularities)


async def test_the_form_names_the_model_asks_for_words_and_passes_language(
    scribe: Transcription, engine: FakeElevenLabs
) -> None:
    options = (("language", "en"), ("temperature", "0.2"), ("prompt", "names: Ann"))
    await scribe.transcribe(target(engine), asking(options=options))
    sent = engine.last_request
    assert sent.path == "/v1/speech-to-text" and sent.headers["xi-api-key"] == KEY
    assert sent.body == {
        "model_id": "scribe_v1",
        "timestamps_granularity": "word",
        "tag_audio_events": "false",
        "language_code": "en",
        "temperature": "0.2",
    }


async def test_json_is_the_text_alone_and_the_engines_length_is_kept_beside(
    scribe: Transcription, engine: FakeElevenLabs
) -> None:
    reply = await scribe.transcribe(target(engine), asking("json"))
    assert reply.body == {"text": SCRIPT}
    assert reply.engine_seconds == pytest.approx(2.5, abs=0.05)


async def test_text_is_plain_text(scribe: Transcription, engine: FakeElevenLabs) -> None:
    reply = await scribe.transcribe(target(engine), asking("text"))
    assert reply.body == SCRIPT + "\n"


async def test_verbose_json_has_segments_cut_at_sentences_and_words_when_asked(
    scribe: Transcription, engine: FakeElevenLabs
) -> None:
    reply = await scribe.transcribe(target(engine), asking("verbose_json", granularities=("word",)))
    body = reply.body
    assert isinstance(body, dict)
    assert body["task"] == "transcribe" and body["language"] == "english"
    assert body["duration"] is None, "Parley states its own measure"
    assert [s["text"] for s in body["segments"]] == [
        "Hello there.",
        "How are you today?",
        "Fine thanks",
    ]
    assert [s["id"] for s in body["segments"]] == [0, 1, 2]
    first = body["segments"][0]
    assert set(first) == {
        "id",
        "seek",
        "start",
        "end",
        "text",
        "tokens",
        "temperature",
        "avg_logprob",
        "compression_ratio",
        "no_speech_prob",
    }
    assert first["avg_logprob"] == -0.25 and first["start"] == 0.0
    assert [w["word"] for w in body["words"]] == SCRIPT.split()
    assert all(w["end"] > w["start"] for w in body["words"])
    assert body["segments"][-1]["end"] == body["words"][-1]["end"]


async def test_verbose_json_leaves_words_out_unless_asked(
    scribe: Transcription, engine: FakeElevenLabs
) -> None:
    reply = await scribe.transcribe(target(engine), asking("verbose_json"))
    assert isinstance(reply.body, dict) and "words" not in reply.body
    assert len(reply.body["segments"]) == 3


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
async def test_subtitles_are_written_from_the_segments(
    scribe: Transcription, engine: FakeElevenLabs, fmt: ResponseFormat
) -> None:
    reply = await scribe.transcribe(target(engine), asking(fmt))
    assert isinstance(reply.body, str)
    lines = reply.body.splitlines()
    if fmt == "srt":
        assert lines[:3] == ["1", lines[1], "Hello there."] and "," in lines[1]
        assert "-->" in lines[1] and lines[1].startswith("00:00:00,000")
    else:
        assert lines[0] == "WEBVTT" and lines[2].startswith("00:00:00.000 --> ")
        assert lines[3] == "Hello there."


async def test_a_stream_is_one_delta_and_the_done_event(
    scribe: Transcription, engine: FakeElevenLabs
) -> None:
    async with scribe.transcribe_stream(target(engine), asking("json")) as batches:
        events = [event async for batch in batches for event in batch]
    assert events == [
        {"type": "transcript.text.delta", "delta": SCRIPT},
        {"type": "transcript.text.done", "text": SCRIPT},
    ]


async def test_translation_is_refused_before_anything_is_sent(
    scribe: Transcription, engine: FakeElevenLabs
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        await scribe.transcribe(target(engine), asking("json", "translate"))
    assert refused.value.code == "translation_not_supported" and engine.requests == []


async def test_a_form_the_engine_refuses_relays_its_validation_message(
    scribe: Transcription, engine: FakeElevenLabs
) -> None:
    wrong = Target("scribe", engine.endpoint, KEY, "whisper-1", 2, 10)
    with pytest.raises(UpstreamRejected) as refused:
        await scribe.transcribe(wrong, asking())
    assert refused.value.status == 422 and refused.value.message.startswith("model_id:")


async def test_a_refused_key_and_a_busy_engine_are_the_channels_fault(
    scribe: Transcription, engine: FakeElevenLabs
) -> None:
    wrong = Target("scribe", engine.endpoint, "sk_other", "scribe_v1", 2, 10)
    with pytest.raises(UpstreamRefused) as refused:
        await scribe.transcribe(wrong, asking())
    assert refused.value.retryable and refused.value.upstream_status == 401
    engine.busy, engine.busy_retry_after = 503, 9
    with pytest.raises(UpstreamRefused) as busy:
        await scribe.transcribe(target(engine), asking())
    assert busy.value.retryable and busy.value.retry_after == 9.0


async def test_an_engine_that_does_not_answer_in_time_is_a_timeout(
    scribe: Transcription, engine: FakeElevenLabs
) -> None:
    engine.delay = 1.0
    with pytest.raises(UpstreamTimeout):
        await scribe.transcribe(target(engine, read_timeout=0.2), asking())
