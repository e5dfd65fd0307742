"""The local engine server's application: routes, the error envelope, start and stop.

- ``POST /v1/audio/speech``, ``GET /v1/audio/voices``: eSpeak NG (``engine.speech``);
- ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``: PocketSphinx
  (``engine.hearing``);
- ``GET /v1/models``: ``espeak-ng`` (speech) and ``pocketsphinx-en-us`` (transcription);
- ``GET /health``: ``{"status": "ok"}`` once a recognizer is loaded, 503 ``loading`` before.

Every error is OpenAI's envelope. The engine has no keys: it listens on loopback for a
gateway (Parley) or a local user.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

from parley.api.reply import error_response, http_exception_as_error
from parley.errors import INTERNAL_ERROR_MESSAGE, ParleyError
from parley.local.engine import hearing, speech
from parley.local.engine.espeak import Espeak
from parley.local.engine.workers import Workers

log = logging.getLogger("parley.local.engine")
SPEECH_MODEL = "espeak-ng"
TRANSCRIPTION_MODEL = "pocketsphinx-en-us"
STARTED = int(time.time())
READY: web.AppKey[asyncio.Event] = web.AppKey("ready", asyncio.Event)


@web.middleware
async def envelope(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ParleyError as error:
        return error_response(error)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(http_exception_as_error(exc))
    except Exception:  # the one boundary: anything unexpected is a clean 500
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(ParleyError(INTERNAL_ERROR_MESSAGE))


async def models(request: web.Request) -> web.Response:
    data = [
        {"id": name, "object": "model", "created": STARTED, "owned_by": "parley-engine"}
        for name in (SPEECH_MODEL, TRANSCRIPTION_MODEL)
    ]
    return web.Response(
        body=orjson.dumps({"object": "list", "data": data}), content_type="application/json"
    )


async def health(request: web.Request) -> web.Response:
    """200 ``ok`` once a recognizer is loaded; 503 ``loading`` until then."""
    if not request.app[READY].is_set():
        return web.Response(
            status=503, body=b'{"status":"loading"}', content_type="application/json"
        )
    return web.Response(body=b'{"status":"ok"}', content_type="application/json")


def create_engine_app(espeak: Espeak, recognizers: int = 1) -> web.Application:
    """The engine's application; its workers start and stop with it."""
    app = web.Application(middlewares=[envelope], client_max_size=hearing.MAX_UPLOAD_BYTES)
    app.router.add_post("/v1/audio/speech", speech.create_speech)
    app.router.add_get("/v1/audio/voices", speech.list_voices)
    app.router.add_post("/v1/audio/transcriptions", hearing.create_transcription)
    app.router.add_post("/v1/audio/translations", hearing.create_translation)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        workers = Workers(espeak, recognizers)
        app[speech.WORKERS] = workers
        ready = app[READY] = asyncio.Event()
        warming = asyncio.create_task(workers.warm_up())
        warming.add_done_callback(lambda _: ready.set())
        yield
        warming.cancel()
        workers.close()

    app.cleanup_ctx.append(lifecycle)
    return app
