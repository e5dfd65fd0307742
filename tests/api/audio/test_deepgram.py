"""Speech to text through Parley on a Deepgram channel, with the official SDK.

A caller cannot tell Deepgram from the OpenAI-shaped engines: every response format, the
word timestamps, the streamed events and the billing are the same. The channel's
``deepgram`` settings reach the query; translations are refused, saying why.

| model           | upstream                | translate | stream |
|-----------------|-------------------------|-----------|--------|
| dg-stt          | nova-3                  | no        | yes    |
| dg-claims       | nova-3+claim-600        | no        | yes    |
| dg-translating  | nova-3 (misconfigured)  | yes       | no     |
| dg-broken       | nova-3+fail-503         | no        | yes    |
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest

from parley.runtime.circuit import State
from tests.api.audio.conftest import NANOS_PER_SECOND, PER_MINUTE
from tests.api.harness import Gateway, StartGateway, local_state, records, starting
from tests.clips import clip
from tests.upstreams.deepgram import FakeDeepgram
from tests.upstreams.transcript_script import Script, srt, vtt

KEY = "dg0123456789abcdef0123456789abcdef01234567"
CLIP = clip("mp3", 2.5)
SPOKEN = Script("transcribe", 2.5, "en", 0.0)


@pytest.fixture
async def deepgram() -> AsyncIterator[FakeDeepgram]:
    async with FakeDeepgram(api_key=KEY) as running:
        yield running


def _model(name: str, **abilities: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "transcription",
        "prices": {"per_minute": str(PER_MINUTE)},
        "transcription": {"translate": False, "stream": True, **abilities},
    }


def deepgram_config(deepgram: FakeDeepgram, workdir: Path) -> dict[str, Any]:
    return {
        **local_state(workdir),
        "server": {"max_audio_bytes": 2_000_000},
        "channels": [
            {
                "name": "dg",
                "type": "deepgram",
                "base_url": deepgram.base_url,
                "api_key": KEY,
                "deepgram": {"language": "en", "smart_format": False},
                "timeouts": {"connect": 2, "read": 10, "idle": 10},
                "models": [
                    {"name": "dg-stt", "upstream": "nova-3"},
                    {"name": "dg-claims", "upstream": "nova-3+claim-600"},
                    {"name": "dg-translating", "upstream": "nova-3"},
                    {"name": "dg-broken", "upstream": "nova-3+fail-503"},
                ],
            }
        ],
        "models": [
            _model("dg-stt"),
            _model("dg-claims"),
            _model("dg-translating", translate=True, stream=False),
            _model("dg-broken"),
        ],
    }


@pytest.fixture
async def start_gateway(deepgram: FakeDeepgram, tmp_path: Path) -> AsyncIterator[StartGateway]:
    async with starting(lambda: deepgram_config(deepgram, tmp_path)) as start:
        yield start


@pytest.fixture
async def gateway(start_gateway: StartGateway) -> Gateway:
    return await start_gateway()


@pytest.fixture
async def client(gateway: Gateway) -> openai.AsyncOpenAI:
    return gateway.client(await gateway.key(await gateway.group("listeners")))


async def test_json_is_openais_with_parleys_usage_and_the_channel_settings_sent(
    gateway: Gateway, client: openai.AsyncOpenAI, deepgram: FakeDeepgram
) -> None:
    reply = await client.audio.transcriptions.with_raw_response.create(
        model="dg-stt", file=("talk.mp3", CLIP)
    )
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["x-parley-audio-seconds"] == "2.500"
    body = reply.parse()
    assert body.text == SPOKEN.text
    assert (body.usage.type, body.usage.seconds) == ("duration", 3)
    sent = deepgram.last
    assert sent.headers["Authorization"] == f"Token {KEY}"
    assert sent.headers["Content-Type"] == "audio/mpeg" and sent.file == CLIP
    assert (sent.fields["model"], sent.fields["language"]) == ("nova-3", "en")
    assert (sent.fields["punctuate"], sent.fields["smart_format"]) == ("true", "false")
    (record,) = await records(gateway)
    assert (record.status, record.audio_ms, record.cost_nanos) == (200, 3000, 3 * NANOS_PER_SECOND)


@pytest.mark.parametrize("fmt", ["text", "srt", "vtt"])
async def test_text_and_subtitles(client: openai.AsyncOpenAI, fmt: str) -> None:
    reply = await client.audio.transcriptions.with_raw_response.create(
        model="dg-stt", file=("talk.mp3", CLIP), response_format=fmt
    )
    expected = {"text": SPOKEN.text + "\n", "srt": srt(SPOKEN), "vtt": vtt(SPOKEN)}[fmt]
    kind = "text/vtt" if fmt == "vtt" else "text/plain"
    assert reply.headers["content-type"] == f"{kind}; charset=utf-8"
    assert reply.parse() == expected


async def test_verbose_json_has_segments_and_words_from_deepgram(
    client: openai.AsyncOpenAI,
) -> None:
    body = await client.audio.transcriptions.create(
        model="dg-stt",
        file=("talk.ogg", clip("ogg", 2.5)),
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
        language="de",
    )
    assert (body.task, body.language, body.duration) == ("transcribe", "de", 2.5)
    assert body.text == SPOKEN.text
    assert [s.text for s in body.segments or []] == [s["text"].strip() for s in SPOKEN.segments]
    assert [(s.start, s.end) for s in body.segments or []] == [
        (s["start"], s["end"]) for s in SPOKEN.segments
    ]
    assert [(w.word, w.start, w.end) for w in body.words or []] == [
        (w["word"], w["start"], w["end"]) for w in SPOKEN.words
    ]
    assert body.usage is not None and body.usage.seconds == 3


async def test_a_stream_is_openais_events_billed_once(
    gateway: Gateway, client: openai.AsyncOpenAI, deepgram: FakeDeepgram
) -> None:
    stream = await client.audio.transcriptions.create(
        model="dg-stt", file=("talk.mp3", CLIP), stream=True
    )
    events = [event async for event in stream]
    *deltas, done = events
    assert [event.type for event in deltas] == ["transcript.text.delta"] * 3
    assert "".join(event.delta for event in deltas) == SPOKEN.text
    assert done.type == "transcript.text.done" and done.text == SPOKEN.text
    assert done.usage is not None
    assert done.usage.model_dump(exclude_none=True) == {"type": "duration", "seconds": 3}
    assert deepgram.last.path == "/v1/listen" and deepgram.completed_streams == 1
    (record,) = await records(gateway)
    assert (record.status, record.audio_ms, record.cost_nanos) == (200, 3000, 3 * NANOS_PER_SECOND)


async def test_deepgrams_claimed_duration_is_logged_never_billed(
    gateway: Gateway, client: openai.AsyncOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="parley.audio")
    await client.audio.transcriptions.create(model="dg-claims", file=("talk.mp3", CLIP))
    (record,) = await records(gateway)
    assert (record.audio_ms, record.cost_nanos) == (3000, 3 * NANOS_PER_SECOND)
    lines = [r.getMessage() for r in caplog.records if r.name == "parley.audio"]
    assert any("measured 2.500 s, billed 3 s, engine reported 600 s" in line for line in lines)
    assert any("the engine's 600 s differs" in line for line in lines)


async def test_translations_are_refused_saying_deepgram_does_not_translate(
    gateway: Gateway, client: openai.AsyncOpenAI, deepgram: FakeDeepgram
) -> None:
    with pytest.raises(openai.BadRequestError) as undeclared:
        await client.audio.translations.create(model="dg-stt", file=("talk.mp3", CLIP))
    assert undeclared.value.code == "translation_not_supported"
    with pytest.raises(openai.BadRequestError) as misconfigured:
        await client.audio.translations.create(model="dg-translating", file=("talk.mp3", CLIP))
    assert misconfigured.value.code == "translation_not_supported"
    assert "Deepgram, which does not translate" in misconfigured.value.message
    assert deepgram.uploads == []
    assert [(r.status, r.cost_nanos) for r in await records(gateway)] == [(400, 0)]


async def test_a_deepgram_failure_is_a_502_naming_the_channel_and_not_billed(
    gateway: Gateway, client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.APIStatusError) as failed:
        await client.audio.transcriptions.create(model="dg-broken", file=("talk.mp3", CLIP))
    assert failed.value.status_code == 502
    assert "`dg`" in failed.value.message and KEY not in failed.value.message
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (502, 0)


def _in_front(status: str) -> Any:
    """A tweak: a Deepgram channel answering ``status`` (with ``retry-after: 42``) in front
    of the working one, for ``dg-stt``, its breaker opening on one failure."""

    def tweak(config: dict[str, Any]) -> None:
        working = config["channels"][0]
        config["channels"].insert(
            0,
            {
                **working,
                "name": "dg-spent",
                "priority": 5,
                "breaker": {"failures": 1},
                "models": [{"name": "dg-stt", "upstream": f"nova-3+fail-{status}+retry-after-42"}],
            },
        )

    return tweak


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_busy_deepgram_is_fallen_over_and_its_retry_after_is_the_cool_down(
    start_gateway: StartGateway, deepgram: FakeDeepgram, streamed: bool
) -> None:
    gateway = await start_gateway(_in_front("429"))
    client = gateway.client(await gateway.key(await gateway.group("listeners")))
    if streamed:
        stream = await client.audio.transcriptions.create(
            model="dg-stt", file=("talk.mp3", CLIP), stream=True
        )
        assert [event.type async for event in stream][-1] == "transcript.text.done"
    else:
        body = await client.audio.transcriptions.create(model="dg-stt", file=("talk.mp3", CLIP))
        assert body.text == SPOKEN.text
    (view,) = [v for v in gateway.services.breakers.views("dg-spent") if v.model]
    assert view.state == State.OPEN
    assert view.next_probe_at is not None
    assert 40 < view.next_probe_at - time.time() <= 42  # Deepgram's hint, not the default 10 s
    (record,) = await records(gateway)
    assert (record.channel, record.status, record.audio_ms) == ("dg", 200, 3000)


async def test_a_spent_deepgram_balance_is_the_channels_fault(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(_in_front("402"))
    client = gateway.client(await gateway.key(await gateway.group("listeners")))
    body = await client.audio.transcriptions.create(model="dg-stt", file=("talk.mp3", CLIP))
    assert body.text == SPOKEN.text
    (own,) = [v for v in gateway.services.breakers.views("dg-spent") if not v.model]
    assert own.state == State.OPEN, "the whole channel: its account, not one model"
