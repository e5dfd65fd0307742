"""``Speech`` and ``Voices`` for engines that speak OpenAI's ``/audio/speech`` (channel type
``openai-audio``): vLLM-Omni, OpenAI, Kokoro-FastAPI, speaches.

Speech. The request always carries an explicit ``stream_format`` when the engine can
stream what is asked (wav or pcm at speed 1): ``sse`` when Parley's caller wants events,
else ``audio`` (raw bytes as they are made). Older vLLM-Omni builds read ``stream: true``
as raw audio, so ``stream`` is never sent. Otherwise (mp3, another speed) no
``stream_format`` is sent and the whole file comes back, still relayed as it arrives.
What came back is decided by the reply's Content-Type, never by what was asked:
``text/event-stream`` is decoded (``speech.audio.delta`` base64 audio, ``speech.audio.done``
usage, ``speech.audio.error``), anything else is audio bytes.

Voices (vLLM-Omni's API): ``GET /audio/voices`` (``voices`` minus ``uploaded_voices`` are
the built-in ones; Kokoro's ``[{"id", "name"}]`` list is read too), multipart
``POST /audio/voices`` (``audio_sample``, ``name``, ``consent``, ``ref_text``) and
``DELETE /audio/voices/{name}``. An engine that answers 404 to the list has no voice
management (``VoicesUnsupported``).
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar
from urllib.parse import quote

import orjson

from parley import upstream_json
from parley.domain.wire import JSON
from parley.errors import UpstreamError
from parley.http import Reply
from parley.providers.audio_replies import (
    EngineAdapter,
    engine_refusal,
    handed_over,
    raw_pieces,
    read_answer,
    reply_format,
)
from parley.providers.base import (
    SPEECH,
    VOICES,
    EngineRoster,
    Serves,
    SpeechAudio,
    SpeechRequest,
    Target,
    VoiceClip,
    VoicesUnsupported,
    upstream_errors,
)
from parley.providers.openai.refusal import stream_failure
from parley.sse import SseParser

SPEECH_PATH = "/audio/speech"
VOICES_PATH = "/audio/voices"
STREAMABLE_FORMATS = frozenset({"wav", "pcm"})
LANGUAGE_NAMES = {
    "en": "English",
    "zh": "Chinese",
    "ja": "Japanese",
    "ko": "Korean",
    "de": "German",
    "fr": "French",
    "ru": "Russian",
    "pt": "Portuguese",
    "es": "Spanish",
    "it": "Italian",
}
"""vLLM-Omni's ``language`` takes full names; a language not listed is left to ``Auto``."""


class OpenAIAudioAdapter(EngineAdapter):
    __slots__ = ()
    serves: ClassVar[Serves] = (SPEECH, VOICES)

    @asynccontextmanager
    async def speech(self, target: Target, request: SpeechRequest) -> AsyncIterator[SpeechAudio]:
        body = orjson.dumps(speech_body(target.model, request))
        reply = await self._synthesis(target, SPEECH_PATH, body)
        if reply.content_type == "text/event-stream":
            audio = SpeechAudio(request.response_format, streamed_events=True)
            audio.pieces = _event_pieces(reply, target, audio, self._bounds.max_event_bytes)
        else:
            audio = SpeechAudio(
                reply_format(reply.content_type, request.response_format),
                raw_pieces(reply, target.channel),
            )
        async with handed_over(audio, reply) as handed:
            yield handed

    async def list_voices(self, target: Target) -> EngineRoster:
        with upstream_errors(target.channel):
            reply = await self._send(target, "GET", VOICES_PATH, b"")
            raw = await reply.read(self._bounds.max_reply_bytes)
            if reply.status in (404, 405):
                raise VoicesUnsupported(
                    f"The upstream channel `{target.channel}` has no voice management."
                )
            if reply.status >= 300:
                raise engine_refusal(
                    target.channel, reply.status, raw, target.api_key, reply.headers
                )
            return roster(orjson.loads(raw), target.channel)

    async def create_voice(self, target: Target, clip: VoiceClip) -> str:
        boundary = f"parley-{secrets.token_hex(16)}"
        body = multipart_body(boundary, clip)
        content_type = f"multipart/form-data; boundary={boundary}"
        with upstream_errors(target.channel):
            reply = await self._send(target, "POST", VOICES_PATH, body, content_type)
            created = await read_answer(reply, target, self._bounds.max_reply_bytes)
        voice = created.get("voice") if isinstance(created, dict) else None
        name = voice.get("name") if isinstance(voice, dict) else None
        if not isinstance(name, str) or not name:
            raise UpstreamError(f"The upstream channel `{target.channel}` did not name the voice.")
        return name

    async def delete_voice(self, target: Target, name: str) -> bool:
        path = f"{VOICES_PATH}/{quote(name, safe='')}"
        with upstream_errors(target.channel):
            reply = await self._send(target, "DELETE", path, b"")
            raw = await reply.read(self._bounds.max_reply_bytes)
        if reply.status == 404:
            return False
        if reply.status >= 300:
            raise engine_refusal(target.channel, reply.status, raw, target.api_key, reply.headers)
        return True


def speech_body(model: str, request: SpeechRequest) -> JSON:
    body: JSON = {
        "model": model,
        "input": request.input,
        "response_format": request.response_format,
        "speed": request.speed,
    }
    if request.response_format in STREAMABLE_FORMATS and request.speed == 1.0:
        body["stream_format"] = "sse" if request.sse else "audio"
    if request.voice is not None:
        body["voice"] = request.voice
    if request.instructions is not None:
        body["instructions"] = request.instructions
    if request.language in LANGUAGE_NAMES:
        body["language"] = LANGUAGE_NAMES[request.language]
    return body


def roster(listing: Any, channel: str) -> EngineRoster:
    """Built-in and uploaded names from vLLM-Omni's listing (or Kokoro's id list)."""
    voices = listing.get("voices") if isinstance(listing, dict) else None
    if not isinstance(voices, list):
        raise UpstreamError(
            f"The upstream channel `{channel}` sent a voice list Parley cannot read."
        )
    uploaded_records = listing.get("uploaded_voices") or []
    uploaded = tuple(
        str(item["name"])
        for item in uploaded_records
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    )
    names = [item if isinstance(item, str) else _voice_id(item) for item in voices]
    builtin = tuple(name for name in names if name and name not in uploaded)
    return EngineRoster(builtin=builtin, uploaded=uploaded)


def _voice_id(item: Any) -> str | None:
    if isinstance(item, dict):
        found = item.get("id") or item.get("name")
        return found if isinstance(found, str) else None
    return None


def multipart_body(boundary: str, clip: VoiceClip) -> bytes:
    fields = {"name": clip.name, "consent": clip.consent}
    if clip.transcript:
        fields["ref_text"] = clip.transcript
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        + value.encode()
        + b"\r\n"
        for name, value in fields.items()
    ]
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="audio_sample"; '
        f'filename="reference"\r\nContent-Type: {clip.media_type}\r\n\r\n'
    )
    parts.append(head.encode() + clip.audio + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


async def _event_pieces(
    reply: Reply, target: Target, audio: SpeechAudio, max_event_bytes: int
) -> AsyncGenerator[bytes, None]:
    """The audio of each ``speech.audio.delta`` event; the usage of the ``done`` event."""
    parser = SseParser(max_event_bytes)
    try:
        with upstream_errors(target.channel):
            async for data in reply.pieces():
                for event in parser.feed(data):
                    piece = _event_audio(event.data, target, audio)
                    if piece:
                        yield piece
    finally:
        reply.release()


def _event_audio(data: str, target: Target, audio: SpeechAudio) -> bytes:
    channel = target.channel
    if not data or data == "[DONE]":
        return b""
    try:
        event = upstream_json.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamError(f"The upstream channel `{channel}` sent a broken event.") from None
    if not isinstance(event, dict):
        raise UpstreamError(f"The upstream channel `{channel}` sent a broken event.")
    kind = event.get("type")
    if kind == "speech.audio.error" or "error" in event:
        raise stream_failure(channel, event, target.api_key)
    if kind == "speech.audio.done":
        usage = event.get("usage") or event.get("token_usage")  # speaches says token_usage
        audio.usage = usage if isinstance(usage, dict) else None
        return b""
    encoded = event.get("audio")
    if kind != "speech.audio.delta" or not isinstance(encoded, str):
        return b""
    if isinstance(event.get("response_format"), str):
        audio.format = event["response_format"]
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise UpstreamError(
            f"The upstream channel `{channel}` sent audio that is not base64."
        ) from None
