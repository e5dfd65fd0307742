"""A fake Cartesia API over real HTTP, written from its public API reference.

    async with FakeCartesia(api_key="sk_car_test") as engine:
        engine.endpoint        # "http://127.0.0.1:<port>" (paths start at the root)

Every request must carry ``X-API-Key`` (else 401) and a dated ``Cartesia-Version``
(else 400). Errors are, from version ``2026-03-01`` on, JSON ``{error_code, title,
message, request_id}``; before it, plain text ``Title: Message``.

- ``POST /tts/bytes`` JSON: ``model_id`` (one of ``MODELS``), ``transcript`` (non-empty),
  ``voice`` (``{"mode": "id", "id"}``, a known voice, else 404), ``output_format``
  (``{container: raw|wav, encoding: pcm_s16le|pcm_f32le|pcm_mulaw|pcm_alaw,
  sample_rate}`` or ``{container: mp3, sample_rate, bit_rate}``), ``language``,
  ``generation_config.speed`` (0.6 to 1.5). The reply is chunked audio
  (``application/octet-stream`` for raw, ``audio/wav``, ``audio/mpeg``),
  ``SECONDS_PER_CHARACTER`` a character divided by the speed.
- ``POST /tts/sse``: the same body, raw container only; ``text/event-stream`` of
  ``event: chunk`` / ``data: {"type": "chunk", "data": <base64>, "done": false,
  "status_code": 206, "step_time"}``, a ``timestamps`` event, then ``event: done`` /
  ``data: {"type": "done", "done": true, "status_code": 200}``.
- ``GET /voices?limit&starting_after`` → ``{data: [Voice], has_more}``: at most
  ``page_cap`` a page; public voices have ``is_owner: false``.
- ``POST /voices/clone`` multipart ``clip``, ``name``, ``language`` (required),
  ``description`` → ``{id, name, description, language, is_owner: true, created_at}``.
- ``DELETE /voices/{id}`` → 204; unknown → 404.

Knobs: ``busy`` (status with ``Retry-After``), ``delay`` (seconds before every head),
``drop_after`` (pieces or events before the connection is cut), ``error_after`` (SSE
chunks before an ``error`` event), ``json_errors`` (answer errors as JSON whatever the
version), ``refuse_deletes`` (that many voice deletions answer 502, their message
quoting the ``X-API-Key`` sent, as a careless proxy would, before deletions work again).
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.upstreams.server import FakeServer, received
from tests.upstreams.tones import encoded, sine, wav

SECONDS_PER_CHARACTER = 0.02
MODELS = frozenset({"sonic-2", "sonic-3", "sonic-english", "sonic-latest"})
RATES = frozenset({8000, 16000, 22050, 24000, 44100, 48000})
BIT_RATES = frozenset({32000, 64000, 96000, 128000, 192000})
ENCODINGS = frozenset({"pcm_s16le", "pcm_f32le", "pcm_mulaw", "pcm_alaw"})
PUBLIC = (
    {"id": "694f9389-aac1-45b6-b726-9d9369183238", "name": "Sarah", "language": "en"},
    {"id": "a0e99841-438c-4a64-b679-ae501e7d6091", "name": "Barbershop Man", "language": "en"},
    {"id": "e07c00bc-4134-4eae-9ea4-1a55fb45746b", "name": "Brooke", "language": "en"},
)
JSON_ERRORS_FROM = "2026-03-01"


@dataclass
class FakeCartesia(FakeServer):
    api_key: str = "sk_car_test_key"
    page_cap: int = 2
    busy: int | None = None
    busy_retry_after: float = 15.0
    delay: float = 0.0
    drop_after: int | None = None
    error_after: int | None = None
    json_errors: bool = False
    refuse_deletes: int = 0
    voices: dict[str, dict[str, Any]] = field(default_factory=dict, kw_only=True)
    clips: dict[str, bytes] = field(default_factory=dict, kw_only=True)

    def __post_init__(self) -> None:
        if not self.voices:
            self.voices = {
                voice["id"]: {**voice, "is_owner": False, "description": ""} for voice in PUBLIC
            }

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._gate])
        app.router.add_post("/tts/bytes", self._bytes)
        app.router.add_post("/tts/sse", self._sse)
        app.router.add_get("/voices", self._list)
        app.router.add_post("/voices/clone", self._clone)
        app.router.add_delete("/voices/{voice_id}", self._delete)
        return app

    def error(
        self, request: web.Request, status: int, code: str, title: str, message: str
    ) -> web.Response:
        """An error in the shape the request's ``Cartesia-Version`` gets."""
        version = request.headers.get("Cartesia-Version", "")
        if self.json_errors or version >= JSON_ERRORS_FROM:
            body = {"error_code": code, "title": title, "message": message, "request_id": "r1"}
            return web.json_response(body, status=status)
        return web.Response(status=status, text=f"{title}: {message}")

    @web.middleware
    async def _gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        if request.headers.get("X-API-Key") != self.api_key:
            self.requests.append(received(request, None))
            return self.error(request, 401, "unauthorized", "Unauthorized", "Invalid API key.")
        if not request.headers.get("Cartesia-Version", "")[:4].isdigit():
            self.requests.append(received(request, None))
            message = "The Cartesia-Version header is required."
            return self.error(request, 400, "missing_version", "Bad Request", message)
        if self.busy is not None:
            self.requests.append(received(request, None))
            busy = self.error(
                request, self.busy, "concurrency_limited", "Too Many Requests", "Slow down."
            )
            busy.headers["Retry-After"] = f"{self.busy_retry_after:g}"
            return busy
        reply: web.StreamResponse = await handler(request)
        return reply

    # text to speech

    async def _bytes(self, request: web.Request) -> web.StreamResponse:
        body, refused = await self._tts_body(request)
        if refused is not None:
            return refused
        output = body["output_format"]
        audio = synthesis(body)
        container = output["container"]
        media_type = {"raw": "application/octet-stream", "wav": "audio/wav"}.get(
            container, "audio/mpeg"
        )
        reply = web.StreamResponse(headers={"Content-Type": media_type})
        reply.enable_chunked_encoding()
        await reply.prepare(request)
        for index, start in enumerate(range(0, len(audio), 4096)):
            if self.drop_after is not None and index == self.drop_after:
                assert request.transport is not None
                request.transport.close()
                return reply
            await reply.write(audio[start : start + 4096])
            await asyncio.sleep(0)
        await reply.write_eof()
        return reply

    async def _sse(self, request: web.Request) -> web.StreamResponse:
        body, refused = await self._tts_body(request)
        if refused is not None:
            return refused
        if body["output_format"]["container"] != "raw":
            message = "The SSE endpoint only supports the raw container."
            return self.error(request, 400, "invalid_output_format", "Bad Request", message)
        audio = synthesis(body)
        reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        reply.enable_chunked_encoding()
        await reply.prepare(request)
        for index, start in enumerate(range(0, len(audio), 3200)):
            if self.drop_after is not None and index == self.drop_after:
                assert request.transport is not None
                request.transport.close()
                return reply
            if self.error_after is not None and index == self.error_after:
                failure = {
                    "type": "error",
                    "done": True,
                    "status_code": 500,
                    "error_code": "internal",
                    "title": "Internal Server Error",
                    "message": "generation failed",
                    "request_id": "r1",
                }
                await reply.write(event("error", failure))
                await reply.write_eof()
                return reply
            piece = base64.b64encode(audio[start : start + 3200]).decode()
            chunk = {"type": "chunk", "data": piece, "done": False, "status_code": 206}
            await reply.write(event("chunk", {**chunk, "step_time": 12.5}))
            await asyncio.sleep(0)
        stamps = {"words": ["hi"], "start": [0.0], "end": [0.2]}
        timestamps = {"type": "timestamps", "word_timestamps": stamps, "done": False}
        await reply.write(event("timestamps", {**timestamps, "status_code": 206}))
        await reply.write(event("done", {"type": "done", "done": True, "status_code": 200}))
        await reply.write_eof()
        return reply

    async def _tts_body(self, request: web.Request) -> tuple[Any, web.Response | None]:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return None, self.error(request, 400, "invalid_json", "Bad Request", "Invalid JSON.")
        self.requests.append(received(request, body))
        problem = _problem(body)
        if problem is not None:
            return body, self.error(request, 400, "invalid_request", "Bad Request", problem)
        voice_id = body["voice"]["id"]
        if voice_id not in self.voices:
            message = f"Voice {voice_id} not found."
            return body, self.error(request, 404, "voice_not_found", "Not Found", message)
        return body, None

    # voices

    async def _list(self, request: web.Request) -> web.Response:
        self.requests.append(received(request, dict(request.query)))
        limit = int(request.query.get("limit", "10"))
        if not 1 <= limit <= 100:
            message = "limit must be between 1 and 100."
            return self.error(request, 400, "invalid_request", "Bad Request", message)
        size = min(limit, self.page_cap)
        listed = list(self.voices.values())
        after = request.query.get("starting_after")
        start = 0
        if after is not None:
            ids = [voice["id"] for voice in listed]
            start = ids.index(after) + 1 if after in ids else len(ids)
        page = listed[start : start + size]
        return web.json_response({"data": page, "has_more": start + size < len(listed)})

    async def _clone(self, request: web.Request) -> web.Response:
        form = await request.post()
        self.requests.append(received(request, {k: v for k, v in form.items()}))
        clip, name, language = form.get("clip"), form.get("name"), form.get("language")
        if not isinstance(clip, web.FileField):
            return self.error(request, 400, "invalid_request", "Bad Request", "clip is required.")
        if not isinstance(name, str) or not name or not isinstance(language, str):
            message = "name and language are required."
            return self.error(request, 400, "invalid_request", "Bad Request", message)
        data = clip.file.read()
        if len(data) < 1000:
            message = "The clip is too short."
            return self.error(request, 400, "invalid_clip", "Bad Request", message)
        voice_id = str(uuid.uuid4())
        description = form.get("description")
        voice = {
            "id": voice_id,
            "name": name,
            "description": description if isinstance(description, str) else "",
            "language": language,
            "is_owner": True,
            "created_at": "2026-11-28T00:00:00Z",
        }
        self.voices[voice_id] = voice
        self.clips[voice_id] = data
        return web.json_response(voice)

    async def _delete(self, request: web.Request) -> web.Response:
        self.requests.append(received(request, None))
        if self.refuse_deletes > 0:
            self.refuse_deletes -= 1
            sent = request.headers.get("X-API-Key", "")
            message = f"Upstream connect error (request headers: X-API-Key={sent})."
            return self.error(request, 502, "bad_gateway", "Bad Gateway", message)
        voice = self.voices.get(request.match_info["voice_id"])
        if voice is None:
            return self.error(request, 404, "voice_not_found", "Not Found", "Voice not found.")
        if not voice["is_owner"]:
            message = "You can only delete your own voices."
            return self.error(request, 403, "forbidden", "Forbidden", message)
        del self.voices[voice["id"]]
        return web.Response(status=204)


def _problem(body: Any) -> str | None:
    """What the API would refuse in a TTS body, if anything."""
    if not isinstance(body, dict):
        return "The body must be an object."
    if body.get("model_id") not in MODELS:
        return f"Unknown model_id {body.get('model_id')!r}."
    if not isinstance(body.get("transcript"), str) or not body["transcript"].strip():
        return "transcript must not be empty."
    voice = body.get("voice")
    if not isinstance(voice, dict) or voice.get("mode") != "id" or "id" not in voice:
        return "voice must be {mode: id, id}."
    output = body.get("output_format")
    if not isinstance(output, dict) or output.get("sample_rate") not in RATES:
        return "output_format.sample_rate is not supported."
    if output.get("container") == "mp3":
        if output.get("bit_rate") not in BIT_RATES:
            return "output_format.bit_rate is not supported."
    elif output.get("container") not in ("raw", "wav") or output.get("encoding") not in ENCODINGS:
        return "output_format is not supported."
    speed = (body.get("generation_config") or {}).get("speed", 1.0)
    if not isinstance(speed, int | float) or not 0.6 <= speed <= 1.5:
        return "generation_config.speed must be between 0.6 and 1.5."
    return None


def synthesis(body: dict[str, Any]) -> bytes:
    output = body["output_format"]
    speed = (body.get("generation_config") or {}).get("speed", 1.0)
    seconds = max(0.1, len(body["transcript"]) * SECONDS_PER_CHARACTER / speed)
    rate = output["sample_rate"]
    pcm = sine(seconds, rate, frequency=350.0)
    if output["container"] == "mp3":
        return encoded(pcm, rate, "mp3")
    assert output["encoding"] == "pcm_s16le", "the fake makes 16-bit PCM only"
    return wav(pcm, rate) if output["container"] == "wav" else pcm


def event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: ".encode() + orjson.dumps(payload) + b"\n\n"
