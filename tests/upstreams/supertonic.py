"""A fake Supertone Supertonic server (``supertonic serve``, SDK 1.3.1) over real HTTP.

    async with FakeSupertonic() as engine:
        engine.base_url        # "http://127.0.0.1:<port>/v1"

- ``POST /v1/tts`` JSON: ``text`` (required, non-empty), ``voice`` (default ``M1``; the
  built-in styles M1 to M5 and F1 to F5, or an imported custom style; another name → 400
  ``unknown_voice``), ``lang`` (ISO code or ``na``; another → 400 ``unsupported_lang``),
  ``speed`` (0.7 to 2.0), ``steps`` (1 to 100), ``response_format`` (``wav`` default,
  ``flac``, ``ogg``; mp3/aac/opus/pcm → 400 ``unsupported_response_format``). Out-of-range
  numbers or a voice that is not a string are FastAPI's 422 ``{"detail": [...]}``. The
  body is the whole file, 44.1 kHz mono, with ``X-Audio-Duration`` and ``X-Sample-Rate``.
- ``GET /v1/styles`` → ``{"styles": [{"name", "kind": "builtin"|"custom", "path"}]}``.
- ``GET /v1/health`` → ``{"status": "ok", "model", "sample_rate", "version", "voices_loaded"}``.

Errors are ``{"error": {"message", "type", "code"}}`` (no ``param``). No streaming, no
cloning. The audio is a sine tone of ``SECONDS_PER_CHARACTER`` per character divided by
``speed``. ``engine.requests`` keeps every request's JSON body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.upstreams.server import FakeServer
from tests.upstreams.tones import encoded, sine, wav

RATE = 44100
SECONDS_PER_CHARACTER = 0.02
BUILTIN_STYLES = tuple(f"{kind}{n}" for kind in "MF" for n in range(1, 6))
LANGS = frozenset({"en", "ko", "ja", "tr", "es", "fr", "de", "pt", "na"})
MEDIA_TYPES = {"wav": "audio/wav", "flac": "audio/flac", "ogg": "audio/ogg"}


@dataclass
class FakeSupertonic(FakeServer):
    custom_styles: tuple[str, ...] = ("imported_narrator",)
    busy: int | None = None
    """Answer ``/tts`` with this status (429, 503) and ``retry-after: busy_retry_after``."""
    busy_retry_after: float = 30.0
    requests: list[Any] = field(default_factory=list, kw_only=True)
    """Each /tts request's JSON body (not a ``ReceivedRequest``)."""

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/tts", self._tts)
        app.router.add_get("/v1/styles", self._styles)
        app.router.add_get("/v1/health", self._health)
        return app

    @property
    def last_body(self) -> Any:
        return self.requests[-1]

    async def _tts(self, request: web.Request) -> web.Response:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _detail("body", "JSON decode error")
        self.requests.append(body)
        if self.busy is not None:
            busy = _error(self.busy, "The server is busy.", "busy")
            busy.headers["retry-after"] = f"{self.busy_retry_after:g}"
            return busy
        if not isinstance(body, dict):
            return _detail("body", "Input should be a valid dictionary")
        invalid = _invalid(body)
        if invalid is not None:
            return invalid
        voice = body.get("voice", "M1")
        if voice not in BUILTIN_STYLES and voice not in self.custom_styles:
            return _error(400, f"Unknown voice '{voice}'.", "unknown_voice")
        if body.get("lang", "en") not in LANGS:
            return _error(400, f"Unsupported language '{body['lang']}'.", "unsupported_lang")
        fmt = body.get("response_format", "wav")
        if fmt not in MEDIA_TYPES:
            message = f"Unsupported response_format '{fmt}'; use wav, flac or ogg."
            return _error(400, message, "unsupported_response_format")
        seconds = len(body["text"]) * SECONDS_PER_CHARACTER / float(body.get("speed", 1.0))
        pcm = sine(max(seconds, 0.1), RATE, frequency=330.0)
        audio = wav(pcm, RATE) if fmt == "wav" else encoded(pcm, RATE, fmt)
        headers = {
            "Content-Type": MEDIA_TYPES[fmt],
            "X-Audio-Duration": f"{len(pcm) / 2 / RATE:.3f}",
            "X-Sample-Rate": str(RATE),
            "X-Supertonic-Version": "1.3.1",
        }
        return web.Response(body=audio, headers=headers)

    async def _styles(self, request: web.Request) -> web.Response:
        styles = [
            *({"name": n, "kind": "builtin", "path": f"/styles/{n}.json"} for n in BUILTIN_STYLES),
            *(
                {"name": n, "kind": "custom", "path": f"/custom/{n}.json"}
                for n in self.custom_styles
            ),
        ]
        return web.json_response({"styles": styles})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "status": "ok",
                "model": "supertonic-3",
                "sample_rate": RATE,
                "version": "1.3.1",
                "voices_loaded": len(BUILTIN_STYLES) + len(self.custom_styles),
            }
        )


def _invalid(body: dict[str, Any]) -> web.Response | None:
    """FastAPI's own 422 for what the pydantic schema refuses."""
    text = body.get("text")
    if not isinstance(text, str) or not text:
        return _detail("text", "String should have at least 1 character")
    if "voice" in body and not isinstance(body["voice"], str):
        return _detail("voice", "Input should be a valid string")
    speed = body.get("speed", 1.0)
    if not isinstance(speed, int | float) or not 0.7 <= speed <= 2.0:
        return _detail("speed", "Input should be between 0.7 and 2.0")
    steps = body.get("steps", 8)
    if not isinstance(steps, int) or not 1 <= steps <= 100:
        return _detail("steps", "Input should be between 1 and 100")
    return None


def _error(status: int, message: str, code: str) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return web.json_response(
        {"error": {"message": message, "type": kind, "code": code}}, status=status
    )


def _detail(field_name: str, message: str) -> web.Response:
    detail = [{"type": "value_error", "loc": ["body", field_name], "msg": message}]
    return web.json_response({"detail": detail}, status=422)
