"""``POST /v1/audio/speech`` and ``GET /v1/audio/voices``: eSpeak NG behind OpenAI's speech API.

The body is OpenAI's (``model``, ``input``, ``voice`` as an id or ``{"id"}``,
``response_format``, ``speed``, ``stream_format``) with vLLM-Omni's ``stream``. Replies:

- no ``stream_format``: the whole file (a WAV with exact sizes);
- ``stream_format: "audio"``: the audio as it is made (chunked; a WAV header with sizes
  0xFFFFFFFF), for ``wav`` and ``pcm``; other formats are encoded whole, then sent;
- ``stream_format: "sse"`` (or ``stream: true``): ``speech.audio.delta`` events with
  base64 audio, then ``speech.audio.done`` with ``usage``: ``input_tokens`` are the input's
  characters, ``output_tokens`` the 20 ms frames of audio made.

Audio is 16-bit mono at 24 kHz (``pcm`` is raw samples). ``speed`` (0.25 to 4) scales
eSpeak's 175 words a minute, within its 80 to 450. ``model`` names nothing here (the
engine has one voice maker) and ``language`` is the voice's; ``instructions`` is refused.
The voice list is vLLM-Omni's shape with records: ``{"voices": [{"id", "name",
"language", "gender"}], "uploaded_voices": []}``; there is no cloning.
"""

from __future__ import annotations

import base64
import math
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, suppress
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from parley.audio.wav import wav_header
from parley.errors import InvalidRequest, UnsupportedMediaType
from parley.local.engine import sound
from parley.local.engine.espeak import DEFAULT_VOICE, VOICES, Voice
from parley.local.engine.workers import Workers
from parley.sse import json_event

WORKERS: web.AppKey[Workers] = web.AppKey("workers", Workers)
MAX_INPUT_CHARS = 4096
FRAME_MS = 20


def _body(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidRequest("The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object.")
    return body


def _input(body: dict[str, Any]) -> str:
    text = body.get("input")
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("'input' must be a non-empty string.", param="input")
    if len(text) > MAX_INPUT_CHARS:
        raise InvalidRequest(
            f"'input' is {len(text)} characters long; at most {MAX_INPUT_CHARS} are taken.",
            param="input",
            code="string_above_max_length",
        )
    return text


def _voice(body: dict[str, Any]) -> Voice:
    asked = body.get("voice", body.get("speaker"))
    if isinstance(asked, dict):
        asked = asked.get("id")
    if asked is None:
        return VOICES[DEFAULT_VOICE]
    voice = VOICES.get(asked.lower()) if isinstance(asked, str) else None
    if voice is None:
        raise InvalidRequest(
            f"Unknown voice {asked!r}; GET /v1/audio/voices lists the voices "
            "(en-m1 … en-m7, en-f1 … en-f5, and the same for tr).",
            param="voice",
            code="voice_not_found",
        )
    return voice


def _format(body: dict[str, Any]) -> str:
    fmt = body.get("response_format", "mp3")
    if fmt not in sound.MEDIA_TYPES:
        raise InvalidRequest(
            f"'response_format' must be one of {', '.join(sound.MEDIA_TYPES)}.",
            param="response_format",
        )
    return str(fmt)


def _speed(body: dict[str, Any]) -> float:
    speed = body.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not 0.25 <= speed <= 4:
        raise InvalidRequest("'speed' must be a number from 0.25 to 4.0.", param="speed")
    return float(speed)


def _mode(body: dict[str, Any]) -> str:
    """``whole``, ``audio`` (raw, as made) or ``sse``."""
    stream_format = body.get("stream_format")
    if stream_format not in (None, "audio", "sse"):
        raise InvalidRequest("'stream_format' must be 'audio' or 'sse'.", param="stream_format")
    if stream_format == "audio":
        return "audio"
    if stream_format == "sse" or body.get("stream") is True:
        return "sse"
    return "whole"


async def create_speech(request: web.Request) -> web.StreamResponse:
    if request.content_type not in ("application/json", ""):
        raise UnsupportedMediaType("Send the request as application/json.")
    body = _body(await request.read())
    text, voice, fmt = _input(body), _voice(body), _format(body)
    speed, mode = _speed(body), _mode(body)
    if body.get("instructions"):
        raise InvalidRequest(
            "'instructions' is not supported: eSpeak NG takes no style prompt.",
            param="instructions",
        )
    workers = request.app[WORKERS]
    async with aclosing(workers.speak(text, voice, speed, sound.OUTPUT_RATE)) as audio:
        if mode == "whole":
            pcm = b"".join([piece async for piece in audio])
            data = await workers.encode(pcm, sound.OUTPUT_RATE, fmt)
            return web.Response(body=data, content_type=sound.MEDIA_TYPES[fmt])
        made = Made()
        async with aclosing(_pieces(workers, audio, fmt, made)) as pieces:
            if mode == "audio":
                return await _relay_raw(request, pieces, fmt)
            return await _relay_events(request, pieces, fmt, len(text), made)


@dataclass(slots=True)
class Made:
    """How many samples the synthesis made so far."""

    samples: int = 0

    def frames(self) -> int:
        return math.ceil(self.samples * 1000 / sound.OUTPUT_RATE / FRAME_MS)


async def _pieces(
    workers: Workers, audio: AsyncIterator[bytes], fmt: str, made: Made
) -> AsyncGenerator[bytes, None]:
    """The reply's audio in ``fmt``: streamed formats as made, others whole at the end."""
    if fmt in sound.STREAMED_FORMATS:
        if fmt == "wav":
            yield wav_header(sound.OUTPUT_RATE)
        async for piece in audio:
            made.samples += len(piece) // 2
            yield piece
        return
    pcm = b"".join([piece async for piece in audio])
    made.samples = len(pcm) // 2
    yield await workers.encode(pcm, sound.OUTPUT_RATE, fmt)


async def _relay_raw(
    request: web.Request, pieces: AsyncIterator[bytes], fmt: str
) -> web.StreamResponse:
    reply = web.StreamResponse(headers={"Content-Type": sound.MEDIA_TYPES[fmt]})
    reply.enable_chunked_encoding()
    first = await anext(pieces)  # a failure before any audio is still an envelope
    await reply.prepare(request)
    with suppress(ConnectionResetError):  # the caller left: the synthesis is stopped
        await reply.write(first)
        async for piece in pieces:
            await reply.write(piece)
        await reply.write_eof()
    return reply


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return json_event({"type": kind, **payload}, kind)


async def _relay_events(
    request: web.Request, pieces: AsyncIterator[bytes], fmt: str, characters: int, made: Made
) -> web.StreamResponse:
    reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    reply.headers["Cache-Control"] = "no-cache"
    first = await anext(pieces)
    await reply.prepare(request)
    async for piece in _chain(first, pieces):
        encoded = base64.b64encode(piece).decode("ascii")
        await reply.write(_event("speech.audio.delta", {"audio": encoded, "response_format": fmt}))
    frames = made.frames()
    usage = {"input_tokens": characters, "output_tokens": frames}
    usage["total_tokens"] = characters + frames
    await reply.write(_event("speech.audio.done", {"usage": usage}))
    await reply.write_eof()
    return reply


async def _chain(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for piece in rest:
        yield piece


async def list_voices(request: web.Request) -> web.Response:
    voices = [voice.describe() for voice in VOICES.values()]
    return web.json_response(
        {"voices": voices, "uploaded_voices": []}, dumps=lambda v: orjson.dumps(v).decode()
    )
