"""``parley engine serve`` on its own: OpenAI's audio API over real eSpeak NG and PocketSphinx.

PocketSphinx hears eSpeak's voice imperfectly, and eSpeak's voices vary a little from
call to call (breath noise), so the round trips check that most words come back (seven of
ten), never the exact text.
"""

from __future__ import annotations

import base64
import io
import math
import struct
from typing import Any

import aiohttp
import av
import orjson
import pytest

from parley.providers.openai_audio.adapter import roster

pytestmark = pytest.mark.engines
SENTENCE = "Please call me tomorrow morning. The weather is nice today."
WORDS = SENTENCE.lower().replace(".", "").split()


async def speak(v1: str, **fields: Any) -> tuple[int, str, bytes]:
    body = {"model": "espeak-ng", "input": SENTENCE, "voice": "en-f2", **fields}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{v1}/audio/speech", json=body) as reply,
    ):
        return reply.status, reply.content_type, await reply.read()


async def hear(v1: str, audio: bytes, path: str = "transcriptions", **fields: str) -> Any:
    form = aiohttp.FormData()
    form.add_field("file", audio, filename="clip", content_type="application/octet-stream")
    form.add_field("model", "pocketsphinx-en-us")
    for name, value in fields.items():
        form.add_field(name, value)
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{v1}/audio/{path}", data=form) as reply,
    ):
        raw = await reply.read()
        if reply.content_type == "application/json":
            return reply.status, orjson.loads(raw)
        return reply.status, raw.decode()


def seconds(audio: bytes) -> float:
    with av.open(io.BytesIO(audio)) as container:
        samples = sum(frame.samples for frame in container.decode(audio=0))
        rate = container.streams.audio[0].rate
    return samples / rate


def heard_most(text: str) -> bool:
    said = text.lower().split()
    return sum(word in said for word in WORDS) >= 7


async def test_voices_are_listed_in_the_shape_parleys_adapter_reads(engine_v1: str) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{engine_v1}/audio/voices") as reply,
    ):
        listing = await reply.json()
    ids = {voice["id"] for voice in listing["voices"]}
    expected = {f"{lang}-{v}" for lang in ("en", "tr") for v in ("m1", "m7", "f1", "f5")}
    assert expected <= ids
    assert len(ids) == 24
    assert listing["uploaded_voices"] == []
    found = roster(listing, "local")
    assert set(found.builtin) == ids
    assert found.uploaded == ()


async def test_a_whole_wav_has_exact_sizes_at_24_khz(engine_v1: str) -> None:
    status, content_type, audio = await speak(engine_v1, response_format="wav")
    assert (status, content_type) == (200, "audio/wav")
    riff, data = struct.unpack_from("<I", audio, 4)[0], struct.unpack_from("<I", audio, 40)[0]
    assert riff == len(audio) - 8
    assert data == len(audio) - 44
    assert struct.unpack_from("<I", audio, 24)[0] == 24000
    assert 2.0 < seconds(audio) < 8.0


@pytest.mark.parametrize(
    ("fmt", "media_type"),
    [("mp3", "audio/mpeg"), ("flac", "audio/flac"), ("opus", "audio/ogg"), ("aac", "audio/aac")],
)
async def test_every_compressed_format_decodes(engine_v1: str, fmt: str, media_type: str) -> None:
    status, content_type, audio = await speak(engine_v1, response_format=fmt)
    assert (status, content_type) == (200, media_type)
    assert 2.0 < seconds(audio) < 8.0


async def test_pcm_is_raw_samples_and_speed_shortens_it(engine_v1: str) -> None:
    _, content_type, normal = await speak(engine_v1, response_format="pcm")
    _, _, fast = await speak(engine_v1, response_format="pcm", speed=2.0)
    assert content_type == "audio/pcm"
    assert len(normal) % 2 == 0
    assert len(fast) < 0.75 * len(normal)


async def test_streamed_wav_has_placeholder_sizes(engine_v1: str) -> None:
    status, content_type, audio = await speak(
        engine_v1, response_format="wav", stream_format="audio"
    )
    assert (status, content_type) == (200, "audio/wav")
    assert audio[4:8] == b"\xff\xff\xff\xff"
    assert audio[40:44] == b"\xff\xff\xff\xff"
    assert 2.0 < (len(audio) - 44) / 48000 < 8.0


async def test_sse_carries_audio_deltas_and_usage(engine_v1: str) -> None:
    status, content_type, raw = await speak(engine_v1, response_format="pcm", stream_format="sse")
    assert (status, content_type) == (200, "text/event-stream")
    events = [
        orjson.loads(line[len(b"data: ") :])
        for line in raw.split(b"\n")
        if line.startswith(b"data: ")
    ]
    deltas, done = events[:-1], events[-1]
    assert deltas and all(e["type"] == "speech.audio.delta" for e in deltas)
    pcm = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert done["type"] == "speech.audio.done"
    usage = done["usage"]
    assert usage["input_tokens"] == len(SENTENCE)
    assert usage["output_tokens"] == -(-len(pcm) * 1000 // (2 * 24000 * 20))
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert b"event: speech.audio.delta\n" in raw


async def test_a_turkish_voice_speaks(engine_v1: str) -> None:
    turkish = "Yar\u0131n sabah beni ara l\u00fctfen."
    status, _, audio = await speak(engine_v1, input=turkish, voice="tr-m3", response_format="wav")
    assert status == 200
    assert seconds(audio) > 1.0


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"voice": "alloy"}, "voice"),
        ({"response_format": "ogg"}, "response_format"),
        ({"speed": 9}, "speed"),
        ({"input": "   "}, "input"),
        ({"instructions": "cheerful"}, "instructions"),
        ({"stream_format": "chunks"}, "stream_format"),
    ],
)
async def test_bad_speech_requests_are_400_envelopes(
    engine_v1: str, fields: dict[str, Any], param: str
) -> None:
    status, content_type, raw = await speak(engine_v1, **fields)
    assert (status, content_type) == (400, "application/json")
    error = orjson.loads(raw)["error"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert error["message"]


async def test_speech_round_trip_in_every_transcript_format(engine_v1: str) -> None:
    _, _, audio = await speak(engine_v1, response_format="mp3")
    status, reply = await hear(engine_v1, audio)
    assert status == 200
    assert heard_most(reply["text"])
    seconds_heard = reply["usage"]["seconds"]
    _, text = await hear(engine_v1, audio, response_format="text")
    assert heard_most(text) and text.endswith("\n")
    _, verbose = await hear(
        engine_v1, audio, response_format="verbose_json", **{"timestamp_granularities[]": "word"}
    )
    assert (verbose["task"], verbose["language"]) == ("transcribe", "english")
    assert 2.0 < verbose["duration"] < 6.0
    assert seconds_heard == math.ceil(verbose["duration"])
    assert verbose["segments"][0]["start"] < verbose["segments"][-1]["end"]
    assert [w["word"] for w in verbose["words"]] == verbose["text"].split()
    _, srt = await hear(engine_v1, audio, response_format="srt")
    assert srt.startswith("1\n00:00:0") and " --> " in srt
    _, vtt = await hear(engine_v1, audio, response_format="vtt")
    assert vtt.startswith("WEBVTT\n\n00:00:0")


async def test_translation_of_english_is_its_transcription(engine_v1: str) -> None:
    _, _, audio = await speak(engine_v1, response_format="wav")
    status, reply = await hear(engine_v1, audio, "translations")
    assert status == 200
    assert heard_most(reply["text"])
    assert "usage" not in reply
    _, verbose = await hear(engine_v1, audio, "translations", response_format="verbose_json")
    assert verbose["task"] == "translate"


async def test_streamed_transcription_is_openais_events(engine_v1: str) -> None:
    _, _, audio = await speak(engine_v1, response_format="wav")
    status, raw = await hear(engine_v1, audio, stream="true")
    assert status == 200
    events = [orjson.loads(line[6:]) for line in raw.split("\n") if line.startswith("data: ")]
    assert events[-1]["type"] == "transcript.text.done"
    said = "".join(e["delta"] for e in events[:-1] if e["type"] == "transcript.text.delta")
    assert said == events[-1]["text"]
    assert heard_most(said)


@pytest.mark.parametrize("path", ["transcriptions", "translations"])
async def test_another_language_is_a_clear_400(engine_v1: str, path: str) -> None:
    _, _, audio = await speak(engine_v1, response_format="wav")
    status, reply = await hear(engine_v1, audio, path, language="tr")
    assert status == 400
    assert reply["error"]["param"] == "language"
    assert reply["error"]["code"] == "unsupported_language"
    assert "English only" in reply["error"]["message"]


async def test_a_file_that_is_not_audio_is_a_400(engine_v1: str) -> None:
    status, reply = await hear(engine_v1, b"this is not audio at all" * 40)
    assert status == 400
    assert (reply["error"]["param"], reply["error"]["code"]) == ("file", "invalid_audio")


async def test_unknown_routes_and_methods_are_envelopes(engine_v1: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{engine_v1}/audio/voices", data=b"x") as reply:
            assert reply.status == 405
            assert (await reply.json())["error"]["code"] == "method_not_allowed"
        async with session.get(f"{engine_v1}/nothing") as reply:
            assert reply.status == 404
            assert (await reply.json())["error"]["type"] == "invalid_request_error"
