"""A fake OpenAI-style speech engine over real HTTP: vLLM-Omni (Qwen3-TTS) by default.

    async with FakeAudioEngine() as engine:          # vLLM-Omni: voices, SSE with event lines
    async with FakeAudioEngine.plain() as engine:    # Kokoro-FastAPI / tts-1: no voice
                                                     # management, SSE asked for is ignored

``engine.base_url`` ends in ``/v1``; ``engine.requests`` keeps every request.

Speech (``POST /v1/audio/speech``, JSON), as ``docs/serving/speech_api.md`` describes it:
``input`` (empty → 400 "Input text cannot be empty"), ``model`` (if given it must be one of
``engine.models``, else 404), ``voice`` (a string or ``{"id": ...}``, folded as
``voice_folding`` says; a voice the engine does not have is a 400; the voice each call
spoke with, the default when none was named, is kept in ``engine.spoken``),
``instructions``, ``response_format`` (wav default,
pcm, flac, mp3, opus; mp3 default and aac too for ``plain``), ``speed`` (0.25 to 4),
``stream_format`` (``sse``|``audio``), ``stream``. With ``stream_format: "audio"`` the audio
leaves in ``chunks`` raw pieces (a WAV starts with a 44-byte header whose sizes are
0xFFFFFFFF); with ``stream: true`` or ``stream_format: "sse"`` it leaves as
``speech.audio.delta`` events (``event:`` + ``data:`` lines; ``sse="data"``: ``data:`` lines
only, as OpenAI; ``sse="none"``: the request is answered with raw audio, as tts-1 and
Kokoro do), then ``speech.audio.done`` with usage. Any stream needs wav or pcm and speed 1.
Without streaming the whole file is sent, with ``x-vllm-omni-*-tokens`` headers.

The audio is a sine tone: ``SECONDS_PER_CHARACTER`` of it per input character (at least
``MIN_SECONDS``), at ``rate`` Hz, 16-bit mono. Usage: ``input_tokens`` = words of the input,
``output_tokens`` = tenths of a second produced.

Voices (unless ``plain``): ``GET /v1/audio/voices`` → ``{"voices", "uploaded_voices"}``;
``POST /v1/audio/voices`` multipart ``audio_sample`` (≤10 MB, 1 to 30 s, decoded by PyAV),
``name`` (trimmed, folded; no ``/ \\ NUL``, not ``.``/``..``), ``consent``, optional
``ref_text``; an existing name is overwritten silently. ``DELETE /v1/audio/voices/{name}``
→ ``{"success": true, ...}``, 404 ``{"success": false, "error": ...}`` when unknown.
Errors are ``{"error": {...}}``, or ``{"detail": "..."}`` with ``legacy_errors=True``.

Voice names are folded the way ``voice_folding`` says: ``lower`` (vLLM-Omni's
``str.lower``, the default), ``casefold`` (``str.casefold``) or ``unicode`` (NFKC, then
``casefold``, as an engine matching names caselessly by Unicode's rules would).

Knobs for failures: ``roster_status`` (the voice list answers with that status and an
error, e.g. 503, while speech and uploads still work), ``delay`` (seconds before each
streamed piece), ``gate`` (an event the engine waits for after the first piece),
``error_after`` (after N pieces: an ``speech.audio.error`` event, or a dropped connection
for raw audio), ``drop_after`` (after N pieces, drop the connection), ``drop_voice_list``
(send half the voice list, then drop), ``leak`` (a refused speech request's error message
quotes the request's ``Authorization`` header, as a careless proxy in front of it would),
``busy`` (speech answers this status, 429 or 503, with ``retry-after: busy_retry_after``
seconds, as an overloaded server does), ``refuse_deletes`` (that many voice deletions
answer 503, quoting the ``Authorization`` header with ``leak``, before they work again).
Counters: ``completed_streams``, ``cancelled_streams``.
"""

from __future__ import annotations

import asyncio
import base64
import io
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal

import av
import orjson
from aiohttp import web

from tests.upstreams.server import (
    JSON,
    FakeServer,
    authorized,
    openai_error,
    received,
)
from tests.upstreams.tones import encoded, sine, wav, wav_header

SECONDS_PER_CHARACTER = 0.02
MIN_SECONDS = 0.4
BUILTIN_VOICES = ("vivian", "ryan", "aiden", "serena")
MAX_SAMPLE_BYTES = 10 * 1024 * 1024
MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
}
SseStyle = Literal["events", "data", "none"]
Folding = Literal["lower", "casefold", "unicode"]


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class FakeAudioEngine(FakeServer):
    api_key: str | None = None
    models: tuple[str, ...] = ("qwen3-tts",)
    voices: tuple[str, ...] = BUILTIN_VOICES
    default_voice: str = "vivian"
    voice_management: bool = True
    sse: SseStyle = "events"
    formats: tuple[str, ...] = ("wav", "pcm", "flac", "mp3", "opus")
    default_format: str = "wav"
    legacy_errors: bool = False
    rate: int = 24000
    chunks: int = 4
    delay: float = 0.0
    gate: asyncio.Event | None = None
    error_after: int | None = None
    drop_after: int | None = None
    drop_voice_list: bool = False
    voice_folding: Folding = "lower"
    roster_status: int | None = None
    leak: bool = False
    busy: int | None = None
    busy_retry_after: float = 30.0
    refuse_deletes: int = 0
    spoken: list[str] = field(default_factory=list)
    uploaded: dict[str, JSON] = field(default_factory=dict)
    samples: dict[str, bytes] = field(default_factory=dict)
    completed_streams: int = 0
    cancelled_streams: int = 0

    @classmethod
    def plain(cls, **knobs: Any) -> FakeAudioEngine:
        """An OpenAI-style server without voice management (Kokoro-FastAPI, tts-1)."""
        settings: JSON = {
            "models": ("kokoro",),
            "voices": ("af_heart", "am_adam"),
            "default_voice": "af_heart",
            "voice_management": False,
            "sse": "none",
            "formats": ("mp3", "opus", "aac", "flac", "wav", "pcm"),
            "default_format": "mp3",
        }
        return cls(**{**settings, **knobs})

    def application(self) -> web.Application:
        app = web.Application(client_max_size=4 * MAX_SAMPLE_BYTES)
        app.router.add_post("/v1/audio/speech", self._speech)
        if self.voice_management:
            app.router.add_get("/v1/audio/voices", self._list)
            app.router.add_post("/v1/audio/voices", self._upload)
            app.router.add_delete("/v1/audio/voices/{name}", self._delete)
        return app

    # speech

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        self.requests.append(received(request, body))
        try:
            self._authorize(request)
            if not isinstance(body, dict):
                raise Refused(400, "The body is not a JSON object.")
            if self.busy is not None:
                refused = self._error(Refused(self.busy, "The engine is overloaded."))
                refused.headers["retry-after"] = f"{self.busy_retry_after:g}"
                return refused
            return await self._speak(request, body)
        except Refused as refused:
            if self.leak:
                quoted = request.headers.get("Authorization", "")
                refused = Refused(refused.status, f"{refused.message} (Authorization: {quoted})")
            return self._error(refused)

    async def _speak(self, request: web.Request, body: JSON) -> web.StreamResponse:
        text = body.get("input")
        if not isinstance(text, str) or not text.strip():
            raise Refused(400, "Input text cannot be empty")
        model = body.get("model")
        if model is not None and model not in self.models:
            raise Refused(404, f"The model `{model}` does not exist.")
        voice = self._voice(body.get("voice"))
        fmt = body.get("response_format") or self.default_format
        if fmt not in self.formats:
            raise Refused(400, f"Unsupported response_format '{fmt}'.")
        speed = body.get("speed", 1.0)
        if not isinstance(speed, int | float) or not 0.25 <= speed <= 4.0:
            raise Refused(400, "speed must be between 0.25 and 4.0")
        raw = body.get("stream_format") == "audio"
        sse = (bool(body.get("stream")) or body.get("stream_format") == "sse") and not raw
        if sse and self.sse == "none":
            sse, raw = False, True
        if (raw or sse) and (fmt not in ("wav", "pcm") or speed != 1.0):
            raise Refused(
                400,
                "Streaming (stream=true, stream_format='audio', or stream_format='sse') "
                "requires response_format='pcm' or 'wav' and speed 1.0",
            )
        seconds = max(MIN_SECONDS, len(text) * SECONDS_PER_CHARACTER)
        pcm = sine(seconds, self.rate)
        self.spoken.append(voice)
        usage = {
            "input_tokens": len(text.split()),
            "output_tokens": round(seconds * 10),
            "total_tokens": len(text.split()) + round(seconds * 10),
        }
        if sse:
            return await self._stream_sse(request, fmt, pcm, usage)
        if raw:
            return await self._stream_raw(request, fmt, pcm)
        return web.Response(
            body=self._whole(fmt, pcm),
            headers={
                "Content-Type": MEDIA_TYPES[fmt],
                "x-vllm-omni-input-tokens": str(usage["input_tokens"]),
                "x-vllm-omni-output-tokens": str(usage["output_tokens"]),
                "x-vllm-omni-total-tokens": str(usage["total_tokens"]),
            },
        )

    def _voice(self, voice: Any) -> str:
        """The name of the voice the engine speaks with."""
        if isinstance(voice, dict):
            voice = voice.get("id")
        if voice is None:
            return self.default_voice
        if not isinstance(voice, str):
            raise Refused(400, "voice must be a string or an object with an id")
        name = self.fold(voice)
        if name not in self.voices and name not in self.uploaded:
            raise Refused(400, f"Invalid voice '{voice}'.")
        return name

    def fold(self, name: str) -> str:
        """A voice name as this engine matches it."""
        if self.voice_folding == "unicode":
            return unicodedata.normalize("NFKC", name).casefold()
        if self.voice_folding == "casefold":
            return name.casefold()
        return name.lower()

    def _whole(self, fmt: str, pcm: bytes) -> bytes:
        if fmt == "wav":
            return wav(pcm, self.rate)
        if fmt == "pcm":
            return pcm
        container = {"opus": "ogg", "aac": "m4a"}.get(fmt, fmt)
        return encoded(pcm, self.rate, container)

    def _pieces(self, fmt: str, pcm: bytes) -> list[bytes]:
        size = -(-len(pcm) // self.chunks)
        size += size % 2
        pieces = [pcm[i : i + size] for i in range(0, len(pcm), size)]
        if fmt == "wav":
            pieces[0] = wav_header(0, self.rate, streamed=True) + pieces[0]
        return pieces

    async def _stream_raw(self, request: web.Request, fmt: str, pcm: bytes) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": MEDIA_TYPES[fmt]})
        await response.prepare(request)
        for index, piece in enumerate(self._pieces(fmt, pcm)):
            if not await self._before_piece(request, index, broken_by_error=True):
                return response
            await response.write(piece)
        await response.write_eof()
        self.completed_streams += 1
        return response

    async def _stream_sse(
        self, request: web.Request, fmt: str, pcm: bytes, usage: JSON
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index, piece in enumerate(self._pieces(fmt, pcm)):
            if not await self._before_piece(request, index, broken_by_error=False):
                return response
            if index == self.error_after:
                error = {"message": "The engine failed.", "type": "server_error", "param": None}
                await response.write(self._event({"type": "speech.audio.error", "error": error}))
                await response.write_eof()
                return response
            audio = base64.b64encode(piece).decode()
            delta = {"type": "speech.audio.delta", "audio": audio, "response_format": fmt}
            await response.write(self._event(delta))
        await response.write(self._event({"type": "speech.audio.done", "usage": usage}))
        await response.write_eof()
        self.completed_streams += 1
        return response

    async def _before_piece(
        self, request: web.Request, index: int, *, broken_by_error: bool
    ) -> bool:
        """Wait as the knobs say; False when the connection was dropped instead."""
        if index == 1 and self.gate is not None:
            await self.gate.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        dropped = index == self.drop_after or (broken_by_error and index == self.error_after)
        if dropped and request.transport is not None:
            request.transport.close()
            self.cancelled_streams += 1
            return False
        return True

    def _event(self, payload: JSON) -> bytes:
        data = b"data: " + orjson.dumps(payload) + b"\n\n"
        if self.sse == "data":
            return data
        return f"event: {payload['type']}\n".encode() + data

    # voices

    async def _list(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(received(request, None))
        try:
            self._authorize(request)
            if self.roster_status is not None:
                raise Refused(self.roster_status, "The voice list is unavailable.")
        except Refused as refused:
            return self._error(refused)
        body = orjson.dumps(
            {
                "voices": [*self.voices, *self.uploaded],
                "uploaded_voices": list(self.uploaded.values()),
            }
        )
        if not self.drop_voice_list:
            return web.Response(body=body, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = len(body)
        await response.prepare(request)
        await response.write(body[: len(body) // 2])
        if request.transport is not None:
            request.transport.close()
        return response

    async def _upload(self, request: web.Request) -> web.Response:
        try:
            self._authorize(request)
            form = await request.post()
            self.requests.append(received(request, {k: form[k] for k in form}))
            voice = self._store_upload(form)
        except Refused as refused:
            return self._error(refused)
        return web.json_response({"success": True, "voice": voice})

    def _store_upload(self, form: Any) -> JSON:
        sample, name, consent = form.get("audio_sample"), form.get("name"), form.get("consent")
        if not isinstance(sample, web.FileField):
            raise Refused(400, "Either audio_sample or speaker_embedding is required")
        if not isinstance(name, str) or not isinstance(consent, str) or not consent:
            raise Refused(400, "name and consent are required")
        name = self.fold(name.strip())
        if not name or name in (".", "..") or any(mark in name for mark in "/\\\0"):
            raise Refused(400, f"Invalid voice name '{name}'")
        data = sample.file.read()
        if len(data) > MAX_SAMPLE_BYTES:
            raise Refused(400, "Audio file too large (max 10MB)")
        seconds = _decoded_seconds(data)
        if seconds < 1.0:
            raise Refused(400, f"Reference audio too short ({seconds:.1f}s, min 1.0s)")
        if seconds > 30.0:
            raise Refused(400, f"Reference audio too long ({seconds:.1f}s, max 30.0s)")
        voice: JSON = {
            "name": name,
            "consent": consent,
            "created_at": int(time.time()),
            "mime_type": sample.content_type,
            "file_size": len(data),
        }
        if isinstance(form.get("ref_text"), str) and form["ref_text"]:
            voice["ref_text"] = form["ref_text"]
        self.uploaded[name] = voice  # an existing name is overwritten, silently
        self.samples[name] = data
        return voice

    async def _delete(self, request: web.Request) -> web.Response:
        self.requests.append(received(request, None))
        name = self.fold(request.match_info["name"])
        try:
            self._authorize(request)
            if self.refuse_deletes > 0:
                self.refuse_deletes -= 1
                message = "The engine is overloaded."
                if self.leak:
                    message += f" (Authorization: {request.headers.get('Authorization', '')})"
                raise Refused(503, message)
        except Refused as refused:
            return self._error(refused)
        if name not in self.uploaded:
            body = {"success": False, "error": f"Voice '{name}' not found"}
            return web.json_response(body, status=404)
        del self.uploaded[name]
        self.samples.pop(name, None)
        return web.json_response(
            {"success": True, "message": f"Voice '{name}' deleted successfully"}
        )

    # shared

    def _authorize(self, request: web.Request) -> None:
        if not authorized(request, self.api_key):
            raise Refused(401, "Incorrect API key provided.")

    def _error(self, refused: Refused) -> web.Response:
        if self.legacy_errors:
            return web.json_response({"detail": refused.message}, status=refused.status)
        kind = "BadRequestError" if refused.status == 400 else "NotFoundError"
        if refused.status >= 500:
            kind = "ServiceUnavailableError"
        error = openai_error(refused.message, kind, code=refused.status)
        return web.json_response(error, status=refused.status)


def _decoded_seconds(data: bytes) -> float:
    """The clip's length by decoding it whole, as the engine's soundfile does."""
    try:
        with av.open(io.BytesIO(data)) as container:
            samples, rate = 0, 0
            for frame in container.decode(audio=0):
                samples += frame.samples
                rate = frame.sample_rate
    except (av.FFmpegError, IndexError):
        raise Refused(400, "Could not decode the audio sample") from None
    return samples / rate if rate else 0.0
