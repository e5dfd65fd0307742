"""``realtime-local``, the demo's voice agent that runs offline: a ``/v1/realtime`` session
over the real local engines (PocketSphinx hears, SmolLM2 on llama.cpp answers, eSpeak NG
speaks), driven by the official openai SDK with a turn that eSpeak NG said."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from parley.local.demo.children import Child
from parley.local.demo.config import (
    CHAT_MODEL,
    REALTIME_MODEL,
    SPEECH_MODEL,
    TRANSCRIPTION_MODEL,
    VOICE,
    demo_config,
)
from tests.api.harness import Gateway, records
from tests.engines.test_through_parley import SENTENCE, most_words

pytestmark = pytest.mark.engines
RATE = 24_000
CHUNK = RATE * 2 // 10  # 100 ms


@pytest.fixture
async def voice_gateway(
    chat_engine_server: Child, speech_engine_server: Child, tmp_path: Path
) -> AsyncIterator[Gateway]:
    """The demo's gateway with both engines: ``realtime-local`` over them."""
    config = demo_config(tmp_path, chat_engine_server.v1, speech_engine_server.v1)
    gateway = await Gateway.start(config)
    yield gateway
    await gateway.stop()


async def test_the_offline_voice_hears_answers_and_speaks(voice_gateway: Gateway) -> None:
    key = await voice_gateway.key(await voice_gateway.group("demo"))
    client = voice_gateway.client(key)
    said = await client.audio.speech.create(
        model=SPEECH_MODEL, voice=VOICE, input=SENTENCE, response_format="pcm"
    )
    audio = bytes(RATE * 2 // 2) + said.content + bytes(RATE * 2)  # silence around it
    heard, answer, spoken = "", "", 0
    async with client.realtime.connect(model=REALTIME_MODEL) as connection:
        assert (await connection.recv()).type == "session.created"
        await connection.session.update(
            session={"type": "realtime", "instructions": "Answer in one short sentence."}
        )
        for start in range(0, len(audio), CHUNK):
            piece = base64.b64encode(audio[start : start + CHUNK]).decode()
            await connection.input_audio_buffer.append(audio=piece)
        async for event in connection:
            if event.type == "conversation.item.input_audio_transcription.completed":
                heard = event.transcript
            elif event.type == "response.output_audio_transcript.delta":
                answer += event.delta
            elif event.type == "response.output_audio.delta":
                spoken += len(base64.b64decode(event.delta))
            elif event.type == "error":
                pytest.fail(event.error.message)
            elif event.type == "response.done":
                assert event.response.status == "completed"
                break
    assert most_words(heard), heard
    assert answer.strip()
    assert spoken > RATE * 2 // 2  # at least half a second of the answer, at 24 kHz
    found = await records(voice_gateway)
    models = {r.model for r in found}
    assert models == {TRANSCRIPTION_MODEL, CHAT_MODEL, SPEECH_MODEL}
    in_session = [r for r in found if r.endpoint == "/v1/realtime"]
    assert len(in_session) >= 3 and all(r.status == 200 and r.cost_nanos > 0 for r in in_session)
