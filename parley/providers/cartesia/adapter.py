"""``Speech`` and ``Voices`` for Cartesia (channel type ``cartesia``).

Every request carries the channel's key as ``X-API-Key`` and ``Cartesia-Version:
2025-04-16`` (``VERSION``: the dated API this adapter speaks, whose voice specifier is
``{"mode": "id", "id"}``); the channel's ``base_url`` is the API's root
(``https://api.cartesia.ai``).

Speech. Raw audio comes from ``POST /tts/bytes``, events from ``POST /tts/sse``, both
with the JSON body ``model_id`` (the channel's upstream model), ``transcript``, ``voice``,
``output_format``, ``language`` (when the catalogue knows the voice's) and, at a speed
other than 1, ``generation_config.speed`` (Cartesia takes 0.6 to 1.5: a speed outside is
clamped). ``output_format`` is ``{"container": "mp3", "sample_rate": 44100, "bit_rate":
128000}`` for raw mp3, else ``{"container": "raw", "encoding": "pcm_s16le",
"sample_rate"}`` at the offered rate nearest the model's ``sample_rate`` (the SSE
endpoint makes raw audio only; Parley writes WAV headers and encodes MP3 itself). The
bytes are what ``output_format`` named (a raw reply is ``application/octet-stream``);
only ``text/event-stream`` is told apart by its Content-Type. Each SSE
``chunk`` event's base64 ``data`` is handed on as it arrives, so the caller's
``speech.audio.delta`` events follow Cartesia's; ``done`` ends it and ``error`` fails it.
Cartesia has no default voice: on a model without ``default_voice`` a call that names
none gets the first public voice of the first page of voices (one more call).

Voices. ``GET /voices`` page by page (``limit``, ``starting_after`` the last id):
Cartesia's public voices (``is_owner`` false) are the built-in ones; the account's own
(Parley's clones among them) are uploaded ones, never shown to a caller. A clone is made
by ``POST /voices/clone`` (multipart ``clip``, ``name``, ``language``: ``CLONE_LANGUAGE``,
and ``description`` recording the consent); its ``id`` is the engine's name for it.
``DELETE /voices/{id}`` deletes it (404: already gone).

Errors: ``{"error_code", "title", "message"}`` JSON, or older versions' plain text
``Title: Message``; both become OpenAI's envelope (``error_code`` as the ``code``).
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

import orjson

from parley import upstream_json
from parley.domain.voices import clone_owner
from parley.errors import UpstreamError, UpstreamRefused
from parley.http import Reply
from parley.http.multipart import FilePart, MultipartBody
from parley.providers.audio_replies import (
    EngineAdapter,
    engine_refusal,
    handed_over,
    nearest_rate,
    no_voice,
    raw_pieces,
    within,
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
    upstream_errors,
)
from parley.providers.openai.refusal import stream_failure
from parley.sse import SseParser

VERSION = "2025-04-16"
KEY_HEADER = "X-API-Key"
VERSION_HEADER = "Cartesia-Version"
BYTES_PATH = "/tts/bytes"
SSE_PATH = "/tts/sse"
VOICES_PATH = "/voices"
CLONE_PATH = "/voices/clone"
SAMPLE_RATES = (8000, 16000, 22050, 24000, 44100, 48000)
MP3_FORMAT = {"container": "mp3", "sample_rate": 44100, "bit_rate": 128000}
SLOWEST, FASTEST = 0.6, 1.5
PAGE_SIZE = 100
MAX_PAGES = 20
CLONE_LANGUAGE = "en"
"""The language a clone is made in: Parley's clone API names none."""


class CartesiaAdapter(EngineAdapter):
    __slots__ = ()
    serves: ClassVar[Serves] = (SPEECH, VOICES)

    def _credentials(self, target: Target) -> dict[str, str]:
        """Cartesia's key and API version."""
        return {VERSION_HEADER: VERSION, **({KEY_HEADER: target.api_key} if target.api_key else {})}

    async def _answer(self, target: Target, reply: Reply) -> Any:
        raw = await reply.read(self._bounds.max_reply_bytes)
        if reply.status >= 300:
            raise cartesia_refusal(target, reply.status, raw, reply.headers)
        return upstream_json.loads(raw)

    @asynccontextmanager
    async def speech(self, target: Target, request: SpeechRequest) -> AsyncIterator[SpeechAudio]:
        voice = request.voice or await self._first_voice(target)
        body, fmt, rate = tts_body(target.model, request, voice)
        path = SSE_PATH if request.sse else BYTES_PATH
        with upstream_errors(target.channel):
            reply = await self._send(target, "POST", path, orjson.dumps(body), stream=True)
            if reply.status >= 300:
                raw = await reply.read(self._bounds.max_reply_bytes)
                raise cartesia_refusal(target, reply.status, raw, reply.headers)
        if reply.content_type == "text/event-stream":
            audio = SpeechAudio(fmt, sample_rate=rate, streamed_events=True)
            audio.pieces = _chunks(reply, target, self._bounds.max_event_bytes)
        else:
            audio = SpeechAudio(fmt, raw_pieces(reply, target.channel), sample_rate=rate)
        async with handed_over(audio, reply) as handed:
            yield handed

    async def _first_voice(self, target: Target) -> str:
        """The first public voice of the first page of voices: the voice of a call that
        names none on a model without ``default_voice``."""
        with upstream_errors(target.channel):
            query = urlencode({"limit": str(PAGE_SIZE)})
            reply = await self._send(target, "GET", f"{VOICES_PATH}?{query}", b"")
            voices, _ = _page(await self._answer(target, reply), target.channel)
        builtin: list[str] = []
        for voice in voices:
            sort_voice(voice, builtin, [])
        if not builtin:
            raise no_voice()
        return builtin[0]

    async def list_voices(self, target: Target) -> EngineRoster:
        builtin: list[str] = []
        uploaded: list[str] = []
        after: str | None = None
        for _ in range(MAX_PAGES):
            query = {"limit": str(PAGE_SIZE)}
            if after is not None:
                query["starting_after"] = after
            with upstream_errors(target.channel):
                reply = await self._send(target, "GET", f"{VOICES_PATH}?{urlencode(query)}", b"")
                page = await self._answer(target, reply)
            voices, more = _page(page, target.channel)
            for voice in voices:
                sort_voice(voice, builtin, uploaded)
            last = voices[-1] if voices else None
            after = last.get("id") if isinstance(last, dict) else None
            if not more or not isinstance(after, str):
                break
        return EngineRoster(builtin=tuple(builtin), uploaded=tuple(uploaded))

    async def create_voice(self, target: Target, clip: VoiceClip) -> str:
        fields = [
            ("name", clip.name),
            ("language", CLONE_LANGUAGE),
            ("description", f"Cloned through Parley; consent: {clip.consent}"),
        ]
        sample = FilePart("clip", "reference", clip.media_type, io.BytesIO(clip.audio))
        body = MultipartBody(fields, sample)
        with upstream_errors(target.channel):
            reply = await self._send(target, "POST", CLONE_PATH, body, body.content_type)
            created = await self._answer(target, reply)
        voice_id = created.get("id") if isinstance(created, dict) else None
        if not isinstance(voice_id, str) or not voice_id:
            raise UpstreamError(f"The upstream channel `{target.channel}` did not name the voice.")
        return voice_id

    async def delete_voice(self, target: Target, name: str) -> bool:
        path = f"{VOICES_PATH}/{quote(name, safe='')}"
        with upstream_errors(target.channel):
            reply = await self._send(target, "DELETE", path, b"")
            raw = await reply.read(self._bounds.max_reply_bytes)
        if reply.status == 404:
            return False
        if reply.status >= 300:
            raise cartesia_refusal(target, reply.status, raw, reply.headers)
        return True


def tts_body(model: str, request: SpeechRequest, voice: str) -> tuple[dict[str, Any], str, int]:
    """The body for a synthesis in ``voice``, the format it asks for and its rate."""
    if request.response_format == "mp3" and not request.sse:
        output: dict[str, Any] = dict(MP3_FORMAT)
        fmt, rate = "mp3", 44100
    else:
        rate = nearest_rate(SAMPLE_RATES, request.sample_rate)
        output = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": rate}
        fmt = "pcm"
    body: dict[str, Any] = {
        "model_id": model,
        "transcript": request.input,
        "voice": {"mode": "id", "id": voice},
        "output_format": output,
    }
    if request.language is not None:
        body["language"] = request.language
    if request.speed != 1.0:
        body["generation_config"] = {"speed": within(request.speed, SLOWEST, FASTEST)}
    return body, fmt, rate


def sort_voice(voice: Any, builtin: list[str], uploaded: list[str]) -> None:
    """File one listed voice as built-in (Cartesia's public ones) or uploaded."""
    if not isinstance(voice, dict) or not isinstance(voice.get("id"), str):
        return
    name = voice.get("name")
    clone_named = isinstance(name, str) and clone_owner(name) is not None
    public = voice.get("is_owner") is False or voice.get("is_public") is True
    (builtin if public and not clone_named else uploaded).append(voice["id"])


def _page(page: Any, channel: str) -> tuple[list[Any], bool]:
    """A page's voices and whether more follow: ``{"data", "has_more"}``, or the whole
    list as older versions send it."""
    if isinstance(page, list):
        return page, False
    voices = page.get("data") if isinstance(page, dict) else None
    if not isinstance(voices, list):
        raise UpstreamError(
            f"The upstream channel `{channel}` sent a voice list Parley cannot read."
        )
    return voices, page.get("has_more") is True


def cartesia_refusal(
    target: Target, status: int, raw: bytes, headers: Mapping[bytes, bytes]
) -> UpstreamRefused:
    return engine_refusal(target.channel, status, envelope(raw), target.api_key, headers)


def envelope(raw: bytes) -> bytes:
    """OpenAI's envelope for Cartesia's error body (JSON or ``Title: Message`` text)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = raw.decode("utf-8", errors="replace").strip()
        return orjson.dumps({"error": {"message": text}}) if text else raw
    if not isinstance(body, dict) or "error" in body:
        return raw
    message = body.get("message") or body.get("title")
    if not isinstance(message, str):
        return raw
    error: dict[str, object] = {"message": message}
    if isinstance(body.get("error_code"), str):
        error["code"] = body["error_code"]
    return orjson.dumps({"error": error})


async def _chunks(
    reply: Reply, target: Target, max_event_bytes: int
) -> AsyncGenerator[bytes, None]:
    """The audio of each ``chunk`` event, until ``done``; an ``error`` event fails it."""
    parser = SseParser(max_event_bytes)
    try:
        with upstream_errors(target.channel):
            async for data in reply.pieces():
                for event in parser.feed(data):
                    piece, done = _event_audio(event.data, target)
                    if piece:
                        yield piece
                    if done:
                        return
        raise UpstreamError(
            f"The upstream channel `{target.channel}` ended the stream before its end."
        )
    finally:
        reply.release()


def _event_audio(data: str, target: Target) -> tuple[bytes, bool]:
    """One event's audio, and whether it ends the stream."""
    if not data:
        return b"", False
    event = upstream_json.loads(data)
    if not isinstance(event, dict):
        raise UpstreamError(f"The upstream channel `{target.channel}` sent a broken event.")
    kind = event.get("type")
    if kind == "error" or "error" in event:
        raise stream_failure(target.channel, _error_envelope(event), target.api_key)
    if kind == "done" or (kind is None and event.get("done") is True):
        return b"", True
    encoded = event.get("data")
    if kind != "chunk" or not isinstance(encoded, str):
        return b"", False  # timestamps, phoneme timestamps
    try:
        return base64.b64decode(encoded, validate=True), event.get("done") is True
    except (binascii.Error, ValueError):
        raise UpstreamError(
            f"The upstream channel `{target.channel}` sent audio that is not base64."
        ) from None


def _error_envelope(event: dict[str, Any]) -> dict[str, Any]:
    message = event.get("message") or event.get("error") or event.get("title")
    return {"error": {"message": str(message), "code": event.get("status_code")}}
