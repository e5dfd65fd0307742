"""``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``: PocketSphinx behind
OpenAI's speech-to-text API.

The form is OpenAI's: ``file`` (any container PyAV reads), ``model`` (names nothing here),
``response_format`` (``json``, ``text``, ``srt``, ``vtt``, ``verbose_json``),
``language``, ``timestamp_granularities[]`` (``word`` adds ``words`` to verbose_json),
``stream`` (transcriptions: OpenAI's transcript events); ``prompt`` and ``temperature``
are accepted and have no effect. The model hears US English only: a ``language`` other
than English is a 400 (``unsupported_language``), and a translation of English audio is
its transcription.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web
from multidict import MultiDictProxy

from parley.errors import InvalidRequest, UnsupportedMediaType
from parley.local.engine.sound import UnreadableAudio
from parley.local.engine.speech import WORKERS
from parley.local.engine.transcripts import CONTENT_TYPES, FORMATS, Heard, render, stream_events
from parley.sse import json_event

MAX_UPLOAD_BYTES = 25 << 20
ENGLISH = frozenset({"en", "en-us", "en-gb", "eng", "english"})
Form = MultiDictProxy[str | bytes | bytearray | web.FileField]


async def create_transcription(request: web.Request) -> web.StreamResponse:
    return await _hear(request, "transcribe")


async def create_translation(request: web.Request) -> web.StreamResponse:
    return await _hear(request, "translate")


async def _hear(request: web.Request, task: str) -> web.StreamResponse:
    if request.content_type != "multipart/form-data":
        raise UnsupportedMediaType("Send the request as multipart/form-data.")
    form: Form = await request.post()
    fmt = _text(form, "response_format") or "json"
    if fmt not in FORMATS:
        raise InvalidRequest(
            f"'response_format' must be one of {', '.join(FORMATS)}.", param="response_format"
        )
    _check_language(_text(form, "language"))
    data = _file(form)
    try:
        words, duration = await request.app[WORKERS].hear(data)
    except UnreadableAudio as error:
        message = str(error).capitalize() + "."
        raise InvalidRequest(message, param="file", code="invalid_audio") from None
    if duration <= 0:
        raise InvalidRequest("The file holds no audio.", param="file", code="empty_audio")
    heard = Heard(words, duration, task)
    if task == "transcribe" and _text(form, "stream") == "true":
        return await _stream(request, heard)
    granularities = form.getall("timestamp_granularities[]", []) + form.getall(
        "timestamp_granularities", []
    )
    body = render(heard, fmt, with_words="word" in granularities)
    if isinstance(body, str):
        return web.Response(body=body.encode(), headers={"Content-Type": CONTENT_TYPES[fmt]})
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _text(form: Form, name: str) -> str | None:
    value = form.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"'{name}' must be a plain form field.", param=name)
    return value.strip()


def _check_language(language: str | None) -> None:
    if language and language.lower() not in ENGLISH:
        raise InvalidRequest(
            f"'language' {language!r} is not supported: this engine's PocketSphinx model "
            "hears US English only (use 'en', or leave 'language' out).",
            param="language",
            code="unsupported_language",
        )


def _file(form: Form) -> bytes:
    upload = form.get("file")
    if not isinstance(upload, web.FileField):
        raise InvalidRequest("'file' must be an uploaded audio file.", param="file")
    data = upload.file.read()
    if not data:
        raise InvalidRequest("The file is empty.", param="file", code="empty_audio")
    return bytes(data)


async def _stream(request: web.Request, heard: Heard) -> web.StreamResponse:
    reply = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await reply.prepare(request)
    for event in stream_events(heard):
        await reply.write(_data(event))
    await reply.write_eof()
    return reply


def _data(event: dict[str, Any]) -> bytes:
    return json_event(event)
