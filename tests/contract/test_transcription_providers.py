"""The contract every ``Transcription`` adapter keeps, against each fake engine over HTTP.

Whatever the engine (OpenAI, speaches, vLLM, Deepgram), the adapter hands back OpenAI's shapes:
``json`` is ``{"text"}``, ``text`` is plain text, ``srt``/``vtt`` are subtitles (written
from segments when the engine cannot), ``verbose_json`` has numbers as numbers and a
``task``, and a stream is ``transcript.text.delta`` events then one ``transcript.text.done``.
Deepgram does not translate: its cases are the transcriptions (its refusal of a
translation is in ``test_deepgram.py``, with what only Deepgram has).
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import pytest

from parley.domain.transcripts import FORMATS, ResponseFormat, Task
from parley.errors import UpstreamError, UpstreamRefused
from parley.http import HttpClient
from parley.providers.base import AudioUpload, Target, Transcription, TranscriptionRequest
from parley.providers.registry import TRANSCRIPTION_TYPES, ProviderRegistry
from tests.clips import clip
from tests.upstreams.deepgram import FakeDeepgram
from tests.upstreams.transcribers import FakeTranscriber
from tests.upstreams.transcript_script import Script, srt, vtt

CLIP = clip("mp3", 2.5)
SCRIPT = Script("transcribe", 2.5, "en", 0.0)
TRANSLATED = Script("translate", 2.5, "en", 0.0)
ENGINES = (*TRANSCRIPTION_TYPES, "deepgram")
CASES = [
    (flavour, task)
    for flavour in ENGINES
    for task in ("transcribe", "translate")
    if task == "transcribe" or flavour != "deepgram"
]
"""Each engine with each task it serves (Deepgram only transcribes)."""
Engine = FakeTranscriber | FakeDeepgram


@pytest.fixture(params=ENGINES)
async def engine(request: pytest.FixtureRequest) -> AsyncIterator[Engine]:
    running: Engine = (
        FakeDeepgram() if request.param == "deepgram" else FakeTranscriber(request.param)
    )
    async with running:
        yield running


@pytest.fixture
async def adapter(engine: Engine) -> AsyncIterator[Transcription]:
    http = HttpClient()
    yield ProviderRegistry.default(http).transcription(engine.flavour)
    await http.close()


def target(engine: Engine, model: str = "whisper-1") -> Target:
    return Target("engine", engine.base_url, None, model, connect_timeout=2, read_timeout=10)


def asking(
    fmt: ResponseFormat = "json",
    task: Task = "transcribe",
    *,
    data: bytes = CLIP,
    options: tuple[tuple[str, str], ...] = (),
    granularities: tuple[str, ...] = (),
) -> TranscriptionRequest:
    upload = AudioUpload(io.BytesIO(data), "speech.mp3", "audio/mpeg")
    return TranscriptionRequest(task, upload, fmt, options, granularities)


@pytest.mark.parametrize(("engine", "task"), CASES, indirect=["engine"])
async def test_json_is_the_text_alone(adapter: Transcription, engine: Engine, task: Task) -> None:
    reply = await adapter.transcribe(target(engine), asking("json", task))
    script = SCRIPT if task == "transcribe" else TRANSLATED
    assert reply.body == {"text": script.text}
    if engine.flavour == "deepgram":
        assert reply.engine_seconds == 2.5, "Deepgram's metadata.duration is kept beside"
    elif engine.flavour != "speaches" and task == "transcribe":
        assert reply.engine_seconds == 3, "the engine's usage.seconds is kept beside"


@pytest.mark.parametrize(("engine", "task"), CASES, indirect=["engine"])
async def test_text_is_plain_text(adapter: Transcription, engine: Engine, task: Task) -> None:
    reply = await adapter.transcribe(target(engine), asking("text", task))
    script = SCRIPT if task == "transcribe" else TRANSLATED
    assert reply.body == script.text + "\n"


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
@pytest.mark.parametrize(("engine", "task"), CASES, indirect=["engine"])
async def test_subtitles_come_whether_or_not_the_engine_writes_them(
    adapter: Transcription, engine: Engine, fmt: ResponseFormat, task: Task
) -> None:
    reply = await adapter.transcribe(target(engine), asking(fmt, task))
    script = SCRIPT if task == "transcribe" else TRANSLATED
    assert reply.body == (srt(script) if fmt == "srt" else vtt(script))
    if engine.flavour == "vllm":
        assert engine.last.fields["response_format"] == "verbose_json"
    if engine.flavour == "deepgram":
        assert engine.last.fields["utterances"] == "true", "segments are its utterances"


@pytest.mark.parametrize(("engine", "task"), CASES, indirect=["engine"])
async def test_verbose_json_has_numbers_and_a_task(
    adapter: Transcription, engine: Engine, task: Task
) -> None:
    reply = await adapter.transcribe(target(engine), asking("verbose_json", task))
    body = reply.body
    assert isinstance(body, dict)
    assert body["task"] == task
    assert body["duration"] == 2.5
    assert isinstance(body["language"], str)
    assert body["text"] == (SCRIPT if task == "transcribe" else TRANSLATED).text
    segments = body["segments"]
    assert [s["id"] for s in segments] == [0, 1, 2]
    for item in segments:
        assert isinstance(item["start"], float)
        assert isinstance(item["end"], float)
        assert isinstance(item["seek"], int)
        assert all(isinstance(token, int) for token in item["tokens"])
    assert segments[-1]["end"] == 2.5
    assert "usage" not in body, "usage is Parley's to state"


async def test_word_timestamps_are_asked_under_the_bracketed_key(
    adapter: Transcription, engine: Engine
) -> None:
    asked = asking("verbose_json", granularities=("word", "segment"))
    reply = await adapter.transcribe(target(engine), asked)
    if engine.flavour == "deepgram":  # every word has its times: nothing to ask for
        assert "timestamp_granularities[]" not in engine.last.fields
    else:
        assert engine.last.fields.getall("timestamp_granularities[]") == ["word", "segment"]
    assert isinstance(reply.body, dict)
    if engine.flavour != "vllm":  # vLLM gives no word timestamps
        assert reply.body["words"][0] == {"word": "This", "start": 0.0, "end": 0.25}


async def test_the_upload_arrives_whole_with_the_fields(
    adapter: Transcription, engine: Engine
) -> None:
    options = (("language", "de"), ("prompt", "Hallo"), ("temperature", "0.2"))
    await adapter.transcribe(target(engine, "upstream-name"), asking(options=options))
    received = engine.last
    assert received.file == CLIP
    assert received.fields["model"] == "upstream-name"
    assert received.fields["language"] == "de"
    if engine.flavour == "deepgram":  # the body is the audio; Deepgram has no prompt
        assert received.content_type == "audio/mpeg"
        assert "prompt" not in received.fields and "temperature" not in received.fields
        return
    assert (received.filename, received.content_type) == ("speech.mp3", "audio/mpeg")
    assert received.fields["prompt"] == "Hallo"
    assert received.fields["temperature"] == "0.2"


async def test_a_stream_is_openai_transcript_events(adapter: Transcription, engine: Engine) -> None:
    events = []
    async with adapter.transcribe_stream(target(engine, "gpt-4o-transcribe"), asking()) as batches:
        async for batch in batches:
            events.extend(batch)
    *deltas, done = events
    assert deltas, "at least one delta"
    assert all(event["type"] == "transcript.text.delta" for event in deltas)
    assert done["type"] == "transcript.text.done"
    assert done["text"] == SCRIPT.text
    assert "".join(event["delta"] for event in deltas).strip() == SCRIPT.text
    assert "usage" not in done


async def test_a_stream_failing_midway_raises_after_what_it_delivered(
    adapter: Transcription, engine: Engine
) -> None:
    events = []
    with pytest.raises(UpstreamError) as failed:
        stream = adapter.transcribe_stream(
            target(engine, "gpt-4o-transcribe+error-after-2"), asking()
        )
        async with stream as batches:
            async for batch in batches:
                events.extend(batch)
    assert [event["type"] for event in events] == ["transcript.text.delta"] * 2
    assert failed.value.status == 502


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_an_engine_failure_may_fall_over(
    adapter: Transcription, engine: Engine, status: int
) -> None:
    with pytest.raises(UpstreamRefused) as refused:
        await adapter.transcribe(target(engine, f"whisper-1+fail-{status}"), asking())
    assert refused.value.retryable
    assert "engine" in refused.value.message


async def test_a_refused_request_relays_the_engines_message(
    adapter: Transcription, engine: Engine
) -> None:
    with pytest.raises(UpstreamRefused) as refused:
        await adapter.transcribe(target(engine, "whisper-1+fail-400"), asking())
    assert not refused.value.retryable
    assert refused.value.status == 400
    assert refused.value.message == "Fake engine failure (status 400)."


async def test_audio_the_engine_cannot_decode_is_the_requests_fault(
    adapter: Transcription, engine: Engine
) -> None:
    with pytest.raises(UpstreamRefused) as refused:
        await adapter.transcribe(target(engine), asking(data=b"RIFF\x00\x00\x00\x00WAVEjunk"))
    assert refused.value.status == 400
    assert not refused.value.retryable


def test_every_format_is_covered() -> None:
    assert set(FORMATS) == {"json", "text", "srt", "vtt", "verbose_json"}
