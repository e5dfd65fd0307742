"""A fake ElevenLabs API over real HTTP, written from its public API reference.

    async with FakeElevenLabs(api_key="xi-test") as engine:
        engine.endpoint        # "http://127.0.0.1:<port>" (paths start at /v1, /v2)

Every request must carry ``xi-api-key`` (else 401 ``invalid_api_key``). Errors are
``{"detail": {"status", "message"}}``; a body the schema refuses is FastAPI's 422
``{"detail": [{"loc", "msg", "type"}]}``.

- ``POST /v1/text-to-speech/{voice_id}`` and ``.../stream``: query ``output_format``
  (``mp3_<rate>_<kbps>``, ``pcm_<rate>``, ``ulaw_8000``... else 422); JSON ``text``
  (required, non-empty), ``model_id`` (one of ``MODELS``, else 400 ``model_not_found``),
  ``voice_settings.speed`` (0.7 to 1.2, else 422), ``language_code`` (only on the v2.5
  models, else 400 ``unsupported_language``). An unknown voice is 404
  ``voice_not_found``. The reply is chunked audio (``audio/mpeg``, or ``audio/pcm`` for
  pcm: 16-bit mono at the format's rate), ``SECONDS_PER_CHARACTER`` a character divided
  by the speed; ``/stream`` writes it in small pieces as it is "made", the plain form in
  a few large ones.
- ``GET /v2/voices?page_size&next_page_token`` → ``{voices, has_more, total_count,
  next_page_token}``; at most ``page_cap`` voices a page, so paging is exercised.
- ``POST /v1/voices/add`` multipart: ``name`` (required), ``files`` (one or more audio
  parts, required), ``description``, ``labels``, ``remove_background_noise`` →
  ``{voice_id, requires_verification: false}``; the voice joins the account as
  ``category: cloned``.
- ``DELETE /v1/voices/{voice_id}`` → ``{"status": "ok"}``; an unknown id is 404
  ``voice_not_found``, a premade one 400 ``voice_not_deletable``.
- ``POST /v1/speech-to-text`` multipart: ``model_id`` (``scribe_v1`` or ``scribe_v2``),
  ``file``, ``timestamps_granularity`` (``none|word|character``), ``language_code``,
  ``tag_audio_events``, ``temperature`` (0 to 2) → ``{language_code, language_probability,
  text, words: [{text, start, end, type, speaker_id, logprob}], audio_duration_secs}``:
  ``SCRIPT``'s words spread over the clip's measured length, with ``spacing`` items
  between them (and an ``audio_event`` when ``tag_audio_events`` is true).

Knobs: ``busy`` answers every call with that status and ``retry-after``; ``delay`` holds
every reply's head that many seconds; ``drop_after`` cuts a synthesis after that many
pieces; ``echo_key_in_errors`` puts the caller's key into a 400's message;
``claimed_seconds`` replaces the clip's length in ``audio_duration_secs``; ``list_fails``
answers the voice list with a 500; ``refuse_deletes`` answers that many voice deletions
with a 500 before it deletes again (its message quoting the key with
``echo_key_in_errors``).
"""

from __future__ import annotations

import asyncio
import io
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

import av
import orjson
from aiohttp import web

from tests.upstreams.server import FakeServer, received
from tests.upstreams.tones import encoded, sine

SECONDS_PER_CHARACTER = 0.02
MODELS = frozenset(
    {"eleven_multilingual_v2", "eleven_flash_v2_5", "eleven_turbo_v2_5", "eleven_v3"}
)
LANGUAGE_MODELS = frozenset({"eleven_flash_v2_5", "eleven_turbo_v2_5"})
STT_MODELS = frozenset({"scribe_v1", "scribe_v2"})
PCM_RATES = frozenset({8000, 16000, 22050, 24000, 32000, 44100, 48000})
OUTPUT_FORMAT = re.compile(
    r"(?:mp3_(?:22050_32|24000_48|44100_(?:32|64|96|128|192))"
    r"|opus_48000_(?:32|64|96|128|192)|pcm_\d+|wav_\d+|ulaw_8000|alaw_8000)"
)
PREMADE = (
    {"voice_id": "JBFqnCBsd6RMkjVDRZzb", "name": "George", "category": "premade"},
    {"voice_id": "21m00Tcm4TlvDq8ikWAM", "name": "Rachel", "category": "premade"},
    {"voice_id": "EXAVITQu4vr4xnSDxMaL", "name": "Sarah", "category": "premade"},
    {"voice_id": "pNInz6obpgDQGcFmaJgB", "name": "Adam", "category": "professional"},
)
SCRIPT = "Hello there. How are you today? Fine thanks"


@dataclass
class FakeElevenLabs(FakeServer):
    api_key: str = "xi-test-key"
    page_cap: int = 2
    busy: int | None = None
    busy_retry_after: float = 20.0
    delay: float = 0.0
    drop_after: int | None = None
    echo_key_in_errors: bool = False
    claimed_seconds: float | None = None
    list_fails: bool = False
    refuse_deletes: int = 0
    voices: dict[str, dict[str, Any]] = field(default_factory=dict, kw_only=True)
    """The account's voices by id: the premade ones, then those added."""
    samples: dict[str, bytes] = field(default_factory=dict, kw_only=True)
    """Each added voice's first sample, by voice id."""
    output_formats: list[str] = field(default_factory=list, kw_only=True)
    """Each synthesis's ``output_format`` query parameter."""

    def __post_init__(self) -> None:
        if not self.voices:
            self.voices = {voice["voice_id"]: dict(voice) for voice in PREMADE}

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._gate])
        app.router.add_post("/v1/text-to-speech/{voice_id}", self._speech)
        app.router.add_post("/v1/text-to-speech/{voice_id}/stream", self._speech)
        app.router.add_get("/v2/voices", self._list)
        app.router.add_post("/v1/voices/add", self._add)
        app.router.add_delete("/v1/voices/{voice_id}", self._delete)
        app.router.add_post("/v1/speech-to-text", self._transcribe)
        return app

    @web.middleware
    async def _gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        if request.headers.get("xi-api-key") != self.api_key:
            self.requests.append(received(request, None))
            return error(401, "invalid_api_key", "Invalid API key.")
        if self.busy is not None:
            self.requests.append(received(request, None))
            busy = error(self.busy, "system_busy", "The system is busy; try again.")
            busy.headers["Retry-After"] = f"{self.busy_retry_after:g}"
            return busy
        reply: web.StreamResponse = await handler(request)
        return reply

    # text to speech

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return invalid("body", "JSON decode error")
        self.requests.append(received(request, body))
        fmt = request.query.get("output_format", "mp3_44100_128")
        self.output_formats.append(fmt)
        if not OUTPUT_FORMAT.fullmatch(fmt):
            return invalid("output_format", f"Input should be a known format, not '{fmt}'")
        refused = self._refusal(body)
        if refused is not None:
            return refused
        if request.match_info["voice_id"] not in self.voices:
            message = f"A voice with voice_id {request.match_info['voice_id']} was not found."
            return error(404, "voice_not_found", message)
        speed = float(body.get("voice_settings", {}).get("speed", 1.0))
        audio, media_type = synthesis(body["text"], speed, fmt)
        streaming = request.path.endswith("/stream")
        return await self._chunked(request, audio, media_type, 1024 if streaming else 16384)

    def _refusal(self, body: Any) -> web.Response | None:
        if not isinstance(body, dict) or not isinstance(body.get("text"), str):
            return invalid("text", "Field required")
        if not body["text"].strip():
            message = "Text must not be empty."
            if self.echo_key_in_errors:
                message += f" (request sent with xi-api-key: {self.api_key})"
            return error(400, "empty_text", message)
        model = body.get("model_id", "eleven_multilingual_v2")
        if model not in MODELS:
            return error(400, "model_not_found", f"A model with model_id {model} was not found.")
        settings = body.get("voice_settings") or {}
        speed = settings.get("speed", 1.0)
        if not isinstance(speed, int | float) or not 0.7 <= speed <= 1.2:
            return invalid("speed", "Input should be between 0.7 and 1.2")
        if "language_code" in body and model not in LANGUAGE_MODELS:
            message = f"Model '{model}' does not support the language_code parameter."
            return error(400, "unsupported_language", message)
        return None

    async def _chunked(
        self, request: web.Request, audio: bytes, media_type: str, piece: int
    ) -> web.StreamResponse:
        reply = web.StreamResponse(headers={"Content-Type": media_type})
        reply.enable_chunked_encoding()
        await reply.prepare(request)
        for index, start in enumerate(range(0, len(audio), piece)):
            if self.drop_after is not None and index == self.drop_after:
                assert request.transport is not None
                request.transport.close()
                return reply
            await reply.write(audio[start : start + piece])
            await asyncio.sleep(0)
        await reply.write_eof()
        return reply

    # voices

    async def _list(self, request: web.Request) -> web.Response:
        self.requests.append(received(request, dict(request.query)))
        if self.list_fails:
            return error(500, "internal_error", "The voice list is unavailable.")
        size = min(int(request.query.get("page_size", "10")), self.page_cap)
        start = int(request.query.get("next_page_token") or 0)
        listed = list(self.voices.values())
        page = listed[start : start + size]
        more = start + size < len(listed)
        return web.json_response(
            {
                "voices": page,
                "has_more": more,
                "total_count": len(listed),
                "next_page_token": str(start + size) if more else None,
            }
        )

    async def _add(self, request: web.Request) -> web.Response:
        form = await request.post()
        self.requests.append(received(request, {k: v for k, v in form.items()}))
        name = form.get("name")
        files = [part for part in form.getall("files", []) if isinstance(part, web.FileField)]
        if not isinstance(name, str) or not name:
            return invalid("name", "Field required")
        if not files:
            return invalid("files", "Field required")
        sample = files[0].file.read()
        if len(sample) < 1000:
            return error(400, "invalid_sample", "The sample is too short to clone from.")
        voice_id = secrets.token_urlsafe(15)[:20]
        description = form.get("description")
        self.voices[voice_id] = {
            "voice_id": voice_id,
            "name": name,
            "category": "cloned",
            "description": description if isinstance(description, str) else None,
        }
        self.samples[voice_id] = sample
        return web.json_response({"voice_id": voice_id, "requires_verification": False})

    async def _delete(self, request: web.Request) -> web.Response:
        self.requests.append(received(request, None))
        voice_id = request.match_info["voice_id"]
        if self.refuse_deletes > 0:
            self.refuse_deletes -= 1
            message = "An internal error occurred while deleting the voice."
            if self.echo_key_in_errors:
                message += f" (request sent with xi-api-key: {self.api_key})"
            return error(500, "internal_error", message)
        voice = self.voices.get(voice_id)
        if voice is None:
            return error(404, "voice_not_found", f"A voice with voice_id {voice_id} was not found.")
        if voice["category"] != "cloned":
            return error(400, "voice_not_deletable", "Premade voices cannot be deleted.")
        del self.voices[voice_id]
        return web.json_response({"status": "ok"})

    # speech to text

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        upload = form.get("file")
        self.requests.append(received(request, fields))
        if fields.get("model_id") not in STT_MODELS:
            return invalid("model_id", "Input should be 'scribe_v1' or 'scribe_v2'")
        if not isinstance(upload, web.FileField):
            return error(400, "missing_file", "Provide a file or a cloud_storage_url.")
        granularity = fields.get("timestamps_granularity", "word")
        if granularity not in ("none", "word", "character"):
            message = "Input should be 'none', 'word' or 'character'"
            return invalid("timestamps_granularity", message)
        temperature = float(fields.get("temperature", "0"))
        if not 0 <= temperature <= 2:
            return invalid("temperature", "Input should be between 0 and 2")
        try:
            seconds = clip_seconds(upload.file.read())
        except av.FFmpegError:
            return error(400, "invalid_audio", "The audio file could not be decoded.")
        events = fields.get("tag_audio_events", "true") == "true"
        reply = transcript(seconds, events, fields.get("language_code"))
        if self.claimed_seconds is not None:
            reply["audio_duration_secs"] = self.claimed_seconds
        return web.json_response(reply)


def synthesis(text: str, speed: float, fmt: str) -> tuple[bytes, str]:
    """The audio ElevenLabs would send for ``text`` in ``fmt``, and its media type."""
    codec, rate, *_ = fmt.split("_")
    seconds = max(0.1, len(text) * SECONDS_PER_CHARACTER / speed)
    pcm = sine(seconds, int(rate), frequency=300.0)
    if codec == "mp3":
        return encoded(pcm, int(rate), "mp3"), "audio/mpeg"
    if codec == "pcm":
        return pcm, "audio/pcm"
    raise AssertionError(f"the fake does not make {fmt}")


def clip_seconds(data: bytes) -> float:
    with av.open(io.BytesIO(data), mode="r") as container:
        frames = list(container.decode(audio=0))
    return sum(frame.samples for frame in frames) / frames[0].sample_rate


def transcript(seconds: float, events: bool, language: str | None) -> dict[str, Any]:
    """``SCRIPT`` as Scribe answers it, its words spread over ``seconds``."""
    words = SCRIPT.split()
    step = seconds / (len(words) + 1)
    items: list[dict[str, Any]] = []
    for index, word in enumerate(words):
        start = round(index * step, 3)
        if index:
            items.append({"text": " ", "start": start, "end": start, "type": "spacing"})
        items.append(
            {
                "text": word,
                "start": start,
                "end": round(start + step * 0.8, 3),
                "type": "word",
                "speaker_id": "speaker_0",
                "logprob": -0.25,
            }
        )
    if events:
        end = round(seconds, 3)
        items.append({"text": "(laughter)", "start": end, "end": end, "type": "audio_event"})
    text = SCRIPT + (" (laughter)" if events else "")
    return {
        "language_code": {"en": "eng", "fr": "fra"}.get(language or "en", language),
        "language_probability": 0.98,
        "text": text,
        "words": items,
        "audio_duration_secs": round(seconds, 3),
        "transcription_id": secrets.token_hex(8),
    }


def error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"detail": {"status": code, "message": message}}, status=status)


def invalid(where: str, message: str) -> web.Response:
    detail = [{"type": "value_error", "loc": ["body", where], "msg": message}]
    return web.json_response({"detail": detail}, status=422)
