"""Speech-to-text and speech-to-English translation through Parley, with the official SDK.

Every response format on both endpoints against each engine gives OpenAI's shapes, with
the right content type, whatever the engine sent (``tests/upstreams/transcribers.py``).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from tests.api.audio.conftest import ENGINE_MODELS, NANOS_PER_SECOND, TRANSCRIPTIONS
from tests.api.harness import Gateway, call, records
from tests.clips import clip
from tests.upstreams.transcribers import FakeTranscriber
from tests.upstreams.transcript_script import Script, srt, vtt

CLIP = clip("mp3", 2.5)
SPOKEN = Script("transcribe", 2.5, "en", 0.0)
TRANSLATED = Script("translate", 2.5, "en", 0.0)
MODELS = list(ENGINE_MODELS)


def endpoint(client: openai.AsyncOpenAI, task: str) -> Any:
    return client.audio.transcriptions if task == "transcribe" else client.audio.translations


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("task", ["transcribe", "translate"])
async def test_json(audio_gateway: Gateway, audio_key: str, model: str, task: str) -> None:
    client = audio_gateway.client(audio_key)
    reply = await endpoint(client, task).with_raw_response.create(
        model=model, file=("talk.mp3", CLIP), response_format="json"
    )
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["x-parley-audio-seconds"] == "2.500"
    body = reply.parse()
    assert body.text == (SPOKEN if task == "transcribe" else TRANSLATED).text
    if task == "transcribe":
        assert body.usage.type == "duration"
        assert body.usage.seconds == 3
    else:
        assert not hasattr(body, "usage"), "OpenAI's translation has no usage"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("task", ["transcribe", "translate"])
@pytest.mark.parametrize("fmt", ["text", "srt", "vtt"])
async def test_text_and_subtitles(
    audio_gateway: Gateway, audio_key: str, model: str, task: str, fmt: str
) -> None:
    client = audio_gateway.client(audio_key)
    reply = await endpoint(client, task).with_raw_response.create(
        model=model, file=("talk.mp3", CLIP), response_format=fmt
    )
    script = SPOKEN if task == "transcribe" else TRANSLATED
    expected = {"text": script.text + "\n", "srt": srt(script), "vtt": vtt(script)}[fmt]
    kind = "text/vtt" if fmt == "vtt" else "text/plain"
    assert reply.headers["content-type"] == f"{kind}; charset=utf-8"
    assert reply.parse() == expected


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("task", ["transcribe", "translate"])
async def test_verbose_json(audio_gateway: Gateway, audio_key: str, model: str, task: str) -> None:
    client = audio_gateway.client(audio_key)
    body = await endpoint(client, task).create(
        model=model, file=("talk.mp3", CLIP), response_format="verbose_json"
    )
    script = SPOKEN if task == "transcribe" else TRANSLATED
    assert body.duration == 2.5
    assert isinstance(body.duration, float), "a number, whatever the engine sent"
    assert body.text == script.text
    assert body.task == task
    assert [segment.text for segment in body.segments] == [s["text"] for s in script.segments]
    assert body.segments[-1].end == 2.5
    if task == "transcribe":
        assert body.usage.seconds == 3


@pytest.mark.parametrize("model", ["whisper", "speaches-stt"])
async def test_word_timestamps_with_the_sdks_bracketed_array(
    audio_gateway: Gateway, audio_key: str, model: str
) -> None:
    body = await audio_gateway.client(audio_key).audio.transcriptions.create(
        model=model,
        file=("talk.mp3", CLIP),
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
    )
    assert [word.word for word in body.words][:4] == ["This", "is", "part", "1."]
    assert body.words[0].end == 0.25


async def test_unbracketed_arrays_and_the_language_are_passed_on(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber]
) -> None:
    form = aiohttp.FormData()
    form.add_field("model", "speaches-stt")
    form.add_field("language", "de")
    form.add_field("prompt", "Ein Gespräch")
    form.add_field("temperature", "0.3")
    form.add_field("response_format", "verbose_json")
    form.add_field("timestamp_granularities", "word")
    form.add_field("chunking_strategy[type]", "server_vad")
    form.add_field("known_speaker_names[]", "agent")
    form.add_field("unknown_field", "kept back")
    form.add_field("file", CLIP, filename="talk.wav", content_type="audio/wav")
    status, body = await call(audio_gateway, "POST", TRANSCRIPTIONS, audio_key, data=form)
    assert status == 200, body
    received = engines["speaches"].last
    assert received.fields["language"] == "de"
    assert received.fields["prompt"] == "Ein Gespräch"
    assert received.fields["temperature"] == "0.3"
    assert received.fields.getall("timestamp_granularities[]") == ["word"]
    assert received.fields["chunking_strategy[type]"] == "server_vad"
    assert received.fields["known_speaker_names[]"] == "agent"
    assert "unknown_field" not in received.fields
    assert body["language"] == "de"
    assert body["words"][0]["word"] == "This"
    assert (received.filename, received.content_type) == ("audio.mp3", "audio/mpeg"), (
        "the engine is told the container Parley found, not the caller's file name"
    )
    assert received.file == CLIP, "the upload reaches the engine byte for byte"


async def test_a_translation_does_not_pass_on_a_language(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber]
) -> None:
    form = aiohttp.FormData()
    form.add_field("model", "vllm-stt")
    form.add_field("language", "de")
    form.add_field("file", CLIP, filename="talk.mp3")
    status, body = await call(audio_gateway, "POST", "/v1/audio/translations", audio_key, data=form)
    assert status == 200 and body["text"].startswith("In English")
    assert "language" not in engines["vllm"].last.fields


async def test_the_channel_key_is_sent_and_the_include_array_passed_on(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber]
) -> None:
    body = await audio_gateway.client(audio_key).audio.transcriptions.create(
        model="gpt4o-stt", file=("talk.mp3", CLIP), include=["logprobs"]
    )
    received = engines["openai"].last
    assert received.headers["Authorization"] == "Bearer sk-openai"
    assert received.fields.getall("include[]") == ["logprobs"]
    assert received.fields["model"] == "gpt-4o-transcribe"
    assert body.logprobs[0].token == "This"


@pytest.mark.parametrize("model", ["gpt4o-stt", "speaches-stt", "vllm-stt"])
async def test_a_streamed_transcription_is_openais_events(
    audio_gateway: Gateway, audio_key: str, model: str
) -> None:
    stream = await audio_gateway.client(audio_key).audio.transcriptions.create(
        model=model, file=("talk.mp3", CLIP), stream=True
    )
    events = [event async for event in stream]
    *deltas, done = events
    assert deltas and all(event.type == "transcript.text.delta" for event in deltas)
    assert "".join(event.delta for event in deltas).strip() == SPOKEN.text
    assert done.type == "transcript.text.done"
    assert done.text == SPOKEN.text
    assert done.usage.type == "duration"
    assert done.usage.seconds == 3


async def post_form(gateway: Gateway, key: str, fields: dict[str, str]) -> aiohttp.ClientResponse:
    """The form with ``CLIP`` as its file, posted raw; the reply, its body already read."""
    form = aiohttp.FormData()
    for name, value in fields.items():
        form.add_field(name, value)
    form.add_field("file", CLIP, filename="talk.mp3")
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/audio/transcriptions",
            data=form,
            headers={"Authorization": f"Bearer {key}"},
        ) as reply,
    ):
        await reply.read()
        return reply


async def test_stream_on_a_model_that_does_not_stream_is_answered_whole_as_openai_does(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber]
) -> None:
    reply = await post_form(audio_gateway, audio_key, {"model": "whisper", "stream": "true"})
    assert reply.status == 200
    assert reply.headers["x-parley-stream"] == "ignored"
    assert reply.content_type == "application/json"
    body = await reply.json()
    assert body["text"] == SPOKEN.text
    assert body["usage"] == {"type": "duration", "seconds": 3}
    assert engines["openai"].last.fields["model"] == "whisper-1"
    assert "stream" not in engines["openai"].last.fields
    (record,) = await records(audio_gateway)
    assert (record.status, record.audio_ms) == (200, 3000)
    assert record.cost_nanos == 3 * NANOS_PER_SECOND

    text = await post_form(
        audio_gateway, audio_key, {"model": "whisper", "stream": "true", "response_format": "srt"}
    )
    assert text.status == 200
    assert text.headers["x-parley-stream"] == "ignored"
    assert (await text.text()) == srt(SPOKEN)


async def test_the_sdk_told_to_stream_from_whisper_gets_the_header_saying_it_did_not(
    audio_gateway: Gateway, audio_key: str
) -> None:
    raw = await audio_gateway.client(audio_key).audio.transcriptions.with_raw_response.create(
        model="whisper", file=("talk.mp3", CLIP), stream=True
    )
    assert raw.headers["x-parley-stream"] == "ignored"
    # as with OpenAI's own whole answer, the SDK finds no events in it
    assert [event async for event in raw.parse()] == []


@pytest.mark.parametrize(("model", "stream"), [("gpt4o-stt", "true"), ("whisper", "false")])
async def test_only_an_ignored_stream_is_marked(
    audio_gateway: Gateway, audio_key: str, model: str, stream: str
) -> None:
    reply = await post_form(audio_gateway, audio_key, {"model": model, "stream": stream})
    assert reply.status == 200
    assert "x-parley-stream" not in reply.headers
    expected = "text/event-stream" if stream == "true" else "application/json"
    assert reply.content_type == expected


async def test_translation_on_a_model_that_cannot_translate_is_400_saying_so(
    audio_gateway: Gateway, audio_key: str, engines: dict[str, FakeTranscriber]
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await audio_gateway.client(audio_key).audio.translations.create(
            model="gpt4o-stt", file=("talk.mp3", CLIP)
        )
    assert refused.value.code == "translation_not_supported"
    assert "cannot translate" in refused.value.message
    assert engines["openai"].uploads == []


async def test_a_format_the_model_does_not_answer_in_is_400(
    audio_gateway: Gateway, audio_key: str
) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await audio_gateway.client(audio_key).audio.transcriptions.create(
            model="gpt4o-stt", file=("talk.mp3", CLIP), response_format="srt"
        )
    assert refused.value.param == "response_format"
    assert "json, text" in refused.value.message


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"response_format": "diarized_json"}, "response_format"),
        ({"temperature": "1.5"}, "temperature"),
        ({"stream": "maybe"}, "stream"),
        ({"timestamp_granularities[]": "word"}, "timestamp_granularities"),
        ({"include[]": "everything"}, "include"),
        ({"model": ""}, "model"),
    ],
)
async def test_bad_fields_are_400_naming_them(
    audio_gateway: Gateway, audio_key: str, fields: dict[str, str], param: str
) -> None:
    form = aiohttp.FormData()
    for name, value in {"model": "whisper", **fields}.items():
        form.add_field(name, value)
    form.add_field("file", CLIP, filename="talk.mp3")
    status, body = await call(audio_gateway, "POST", TRANSCRIPTIONS, audio_key, data=form)
    assert status == 400
    assert body["error"]["param"] == param


async def test_a_chat_model_does_not_transcribe(audio_gateway: Gateway, audio_key: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await audio_gateway.client(audio_key).audio.transcriptions.create(
            model="chat-large", file=("talk.mp3", CLIP)
        )
    assert refused.value.code == "model_not_supported"


async def test_an_unknown_model_is_404(audio_gateway: Gateway, audio_key: str) -> None:
    with pytest.raises(openai.NotFoundError):
        await audio_gateway.client(audio_key).audio.transcriptions.create(
            model="nope", file=("talk.mp3", CLIP)
        )


async def test_json_instead_of_a_form_is_415(audio_gateway: Gateway, audio_key: str) -> None:
    status, body = await call(
        audio_gateway, "POST", TRANSCRIPTIONS, audio_key, json={"model": "whisper"}
    )
    assert status == 415 and body["error"]["type"] == "invalid_request_error"


async def test_models_and_capabilities_show_what_transcription_models_can_do(
    audio_gateway: Gateway, audio_key: str
) -> None:
    listed = await audio_gateway.client(audio_key).models.list()
    records = {model.id: model.model_dump() for model in listed.data}
    assert records["gpt4o-stt"]["kind"] == "transcription"
    assert records["gpt4o-stt"]["transcription"] == {
        "translate": False,
        "stream": True,
        "formats": ["json", "text"],
    }
    assert records["whisper"]["transcription"]["translate"] is True
    assert records["whisper"]["endpoints"] == ["/v1/audio/transcriptions", "/v1/audio/translations"]
    assert records["whisper"]["pricing"]["per_minute"] == 0.006
    _, capabilities = await call(audio_gateway, "GET", "/v1/capabilities", audio_key)
    entries = {entry["key"]: entry for entry in capabilities["data"]}
    assert entries["STT_STREAM"]["model"] == "gpt4o-stt"
    assert entries["STT_STREAM"]["transcription"]["stream"] is True
    assert entries["STT"]["transcription"]["formats"] == [
        "json",
        "text",
        "srt",
        "vtt",
        "verbose_json",
    ]
