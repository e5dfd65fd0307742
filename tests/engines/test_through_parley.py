"""The demo's gateway (``parley.local.demo.config``) in front of the real local engines, called
with the official openai SDK: speech that PocketSphinx hears back, and chat (plain and
streamed) from llama.cpp, every call metered."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import orjson
import pytest

from parley.local.demo.config import CHAT_MODEL, SPEECH_MODEL, TRANSCRIPTION_MODEL
from tests.api.harness import Gateway, records

pytestmark = pytest.mark.engines
SENTENCE = "Please call me tomorrow morning. The weather is nice today."
WORDS = SENTENCE.lower().replace(".", "").split()
HELLO: Any = [{"role": "user", "content": "Say hello in three words."}]


def most_words(text: str) -> bool:
    """More than half of ``SENTENCE``'s ten words were heard.

    eSpeak NG never says a sentence the same way twice (its voices' pitch and noise carry
    state from one call to the next), so what PocketSphinx hears varies: of 250 takes of
    ``SENTENCE`` cut into a realtime turn, 228 were heard whole, 20 lost one to three
    words and 2 heard "the weather is nice today" as "that where there is like a day",
    keeping six. Half the audio lost on its way through Parley would keep five at most."""
    said = text.lower().replace(".", " ").split()
    return sum(word in said for word in WORDS) > len(WORDS) // 2


async def demo_key(gateway: Gateway) -> str:
    return await gateway.key(await gateway.group("demo"))


async def test_speech_round_trip_through_parley(audio_gateway: Gateway) -> None:
    client = audio_gateway.client(await demo_key(audio_gateway))
    for fmt in ("wav", "mp3"):
        speech = await client.audio.speech.create(
            model=SPEECH_MODEL, voice="en-f2", input=SENTENCE, response_format=fmt
        )
        audio = speech.content
        transcript = await client.audio.transcriptions.create(
            model=TRANSCRIPTION_MODEL, file=(f"speech.{fmt}", audio)
        )
        assert most_words(transcript.text), (fmt, transcript.text)
    translation = await client.audio.translations.create(
        model=TRANSCRIPTION_MODEL, file=("speech.mp3", audio)
    )
    assert most_words(translation.text)
    found = await records(audio_gateway)
    speech_records = [r for r in found if r.model == SPEECH_MODEL]
    heard = [r for r in found if r.model == TRANSCRIPTION_MODEL]
    assert [r.characters for r in speech_records] == [len(SENTENCE)] * 2
    assert len(heard) == 3 and all(r.status == 200 and r.audio_ms >= 2000 for r in heard)
    assert all(r.cost_nanos > 0 for r in found)


async def test_streamed_speech_through_parley_ends_with_usage(audio_gateway: Gateway) -> None:
    key = await demo_key(audio_gateway)
    body = {"model": SPEECH_MODEL, "voice": "en-m3", "input": SENTENCE}
    body |= {"response_format": "pcm", "stream_format": "sse"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{audio_gateway.v1}/audio/speech",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
        ) as reply,
    ):
        assert reply.status == 200
        raw = await reply.read()
    events = [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert {e["type"] for e in events[:-1]} == {"speech.audio.delta"}
    done = events[-1]
    assert done["type"] == "speech.audio.done"
    assert done["usage"]["input_characters"] == len(SENTENCE)
    assert done["usage"]["input_tokens"] == len(SENTENCE)  # the engine's count, relayed


async def test_the_voice_list_merges_the_catalogue_and_cannot_clone(
    audio_gateway: Gateway,
) -> None:
    key = await demo_key(audio_gateway)
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{audio_gateway.v1}/audio/voices?model={SPEECH_MODEL}",
            headers={"Authorization": f"Bearer {key}"},
        ) as reply,
    ):
        listing = await reply.json()
    assert listing["supports_custom"] is False
    voices = {voice["id"]: voice for voice in listing["voices"]}
    assert len(voices) == 24
    assert voices["en-f2"]["label"] == "Ada" and voices["tr-m2"]["lang"] == "tr"
    assert voices["en-m5"]["builtin"] is True


async def test_another_language_is_refused_through_parley(audio_gateway: Gateway) -> None:
    client = audio_gateway.client(await demo_key(audio_gateway))
    speech = await client.audio.speech.create(
        model=SPEECH_MODEL, voice="en-f2", input=SENTENCE, response_format="wav"
    )
    with pytest.raises(openai.BadRequestError) as refused:
        await client.audio.transcriptions.create(
            model=TRANSCRIPTION_MODEL, file=("speech.wav", speech.content), language="tr"
        )
    assert refused.value.status_code == 400
    assert "English only" in refused.value.message


async def test_chat_through_llama_cpp_is_metered(chat_gateway: Gateway) -> None:
    client = chat_gateway.client(await demo_key(chat_gateway))
    reply = await client.chat.completions.create(model=CHAT_MODEL, messages=HELLO, max_tokens=16)
    assert reply.choices[0].message.content
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    (record,) = await records(chat_gateway)
    assert (record.status, record.estimated) == (200, False)
    assert record.completion_tokens == reply.usage.completion_tokens
    assert record.cost_nanos > 0


async def test_streamed_chat_through_llama_cpp_is_metered_and_given_usage(
    chat_gateway: Gateway,
) -> None:
    client = chat_gateway.client(await demo_key(chat_gateway))
    stream = await client.chat.completions.create(
        model=CHAT_MODEL,
        messages=HELLO,
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens > 0
    (record,) = await records(chat_gateway)
    assert record.status == 200 and record.estimated  # llama.cpp streams no usage
    assert (record.prompt_tokens, record.completion_tokens) == (
        usage.prompt_tokens,
        usage.completion_tokens,
    )
    assert record.cost_nanos > 0
