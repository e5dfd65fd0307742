"""Fake speech-to-text engines over real HTTP: OpenAI, speaches and vLLM, each with its quirks.

    async with FakeTranscriber("vllm") as engine:
        engine.base_url      # "http://127.0.0.1:<port>/v1"
        engine.uploads       # every request received (ReceivedUpload), oldest first

``POST /v1/audio/transcriptions`` and ``POST /v1/audio/translations`` take OpenAI's
multipart form. Each engine decodes the uploaded file with PyAV, so durations are real
(``transcript_script``). What differs, from ``/work/shared/spec/audio-engines.md``:

- ``openai``: json ``{"text", "usage": {"type": "duration", "seconds"}}`` (translations:
  ``{"text"}``), text/srt/vtt as ``text/plain``, verbose_json with ``task``, ``language``
  as a full name, ``segments`` and ``words`` per ``timestamp_granularities[]``. Models
  named ``gpt-4o…`` answer json and text only (with ``include[]=logprobs`` json carries
  ``logprobs``), stream ``transcript.text.delta`` per word and ``transcript.text.done``
  with tokens usage (no ``[DONE]``), and do not translate; ``whisper-1`` ignores ``stream``.
  Errors are OpenAI envelopes; undecodable audio is 400.
- ``speaches``: json is ``{"text"}`` only; verbose_json has no ``task`` (``words`` null
  unless asked, read only under the bracketed key); ``vtt`` is ``text/vtt``; errors are
  ``{"detail": ...}``; undecodable audio is 415; a stream (any model) sends one delta per
  segment, then ``transcript.text.done`` without usage, and no ``[DONE]``.
- ``vllm``: json and text both answer JSON ``{"text", "usage"}``; srt and vtt are refused
  with 400; verbose_json's ``duration`` is a string (no ``task``, no ``usage``,
  ``no_speech_prob`` null) and cannot stream; a stream is chat-completion-shaped chunks
  (``object: "transcription.chunk"``, ``choices[].delta.content``) ending in ``[DONE]``.

Knobs in the model name, ``+``-separated: ``fail-N`` (answer status N in the engine's own
error shape; with ``retry-after-S``, a ``retry-after: S`` header too, as an overloaded
server answers 429 or 503), ``error-after-N`` (a stream fails after N deltas), ``hang-S``
(wait S s), ``slow-S`` (wait S s before each streamed event), ``stall-after-N`` (a stream
sends N events, then falls silent for ``MAX_HANG`` s). With ``leak=True`` the errors of a
wrong key and of ``fail-N`` quote the request's ``Authorization`` header, as a careless
proxy in front of the engine would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web
from multidict import CIMultiDict, MultiDict

from tests.upstreams.server import FakeServer, authorized, json_reply, openai_error, sse_data
from tests.upstreams.transcript_script import JSON, Script, Task, Undecodable, script_for, srt, vtt

Flavour = Literal["openai", "speaches", "vllm"]
MAX_HANG = 30.0
CREATED = 1_700_000_000


@dataclass(frozen=True, slots=True)
class ReceivedUpload:
    path: str
    headers: CIMultiDict[str]
    fields: MultiDict[str]
    """Every text field, under the key it was sent with (brackets kept)."""
    file: bytes | None
    filename: str | None
    content_type: str | None


@dataclass(frozen=True, slots=True)
class Asked:
    """One request as the engine understood it."""

    task: Task
    model: str
    fields: MultiDict[str]
    script: Script

    @property
    def format(self) -> str:
        return self.fields.get("response_format", "json")

    @property
    def stream(self) -> bool:
        return self.fields.get("stream", "false").lower() == "true"

    def knob(self, name: str) -> str | None:
        for part in self.model.split("+"):
            knob, _, value = part.rpartition("-")
            if knob == name:
                return value
        return None

    def granularities(self, *, bracketed_only: bool = False) -> list[str]:
        found = self.fields.getall("timestamp_granularities[]", [])
        if not bracketed_only:
            found = [*found, *self.fields.getall("timestamp_granularities", [])]
        return found or ["segment"]


@dataclass
class FakeTranscriber(FakeServer):
    flavour: Flavour = "openai"
    api_key: str | None = None
    leak: bool = False
    uploads: list[ReceivedUpload] = field(default_factory=list)
    completed_streams: int = 0

    def application(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/audio/transcriptions", self._endpoint("transcribe"))
        app.router.add_post("/v1/audio/translations", self._endpoint("translate"))
        return app

    @property
    def last(self) -> ReceivedUpload:
        return self.uploads[-1]

    def _endpoint(self, task: Task) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._answer(request, task)

        return handle

    async def _answer(self, request: web.Request, task: Task) -> web.StreamResponse:
        style = STYLES[self.flavour]
        header = request.headers.get("Authorization", "")
        quoted = f" (Authorization: {header})" if self.leak else ""
        if not authorized(request, self.api_key):
            return style.error(401, f"Incorrect API key provided.{quoted}")
        upload = await self._receive(request)
        model = upload.fields.get("model", "")
        if upload.file is None:
            return style.error(400, "Field required: file")
        knobs = Asked(task, model, upload.fields, Script(task, 0, "en", 0))
        fail = knobs.knob("fail")
        if fail is not None:
            failed = style.error(int(fail), f"Fake engine failure (status {fail}).{quoted}")
            retry_after = knobs.knob("retry-after")
            if retry_after is not None:
                failed.headers["retry-after"] = retry_after
            return failed
        try:
            temperature = float(upload.fields.get("temperature", "0"))
            script = script_for(upload.file, task, upload.fields.get("language"), temperature)
        except Undecodable:
            return style.undecodable()
        asked = Asked(task, model, upload.fields, script)
        hang = asked.knob("hang")
        if hang is not None:
            await asyncio.sleep(min(float(hang), MAX_HANG))
        if asked.stream and style.streams(asked):
            response = await style.stream(request, asked)
            self.completed_streams += 1
            return response
        return style.reply(asked)

    async def _receive(self, request: web.Request) -> ReceivedUpload:
        form = await request.post()
        fields: MultiDict[str] = MultiDict()
        file, filename, content_type = None, None, None
        for name, value in form.items():
            if isinstance(value, web.FileField):
                if name == "file":
                    file = value.file.read()
                    filename, content_type = value.filename, value.content_type
            else:
                fields.add(name, str(value))
        upload = ReceivedUpload(
            request.path, CIMultiDict(request.headers), fields, file, filename, content_type
        )
        self.uploads.append(upload)
        return upload


def _text(body: str, content_type: str = "text/plain") -> web.Response:
    return web.Response(text=body, content_type=content_type, charset="utf-8")


async def _events(
    request: web.Request, asked: Asked, events: list[object], done: bool
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    delay = float(asked.knob("slow") or 0)
    stall = asked.knob("stall-after")
    for index, event in enumerate(events):
        if delay:
            await asyncio.sleep(min(delay, MAX_HANG))
        if stall is not None and index == int(stall):
            await asyncio.sleep(MAX_HANG)
        await response.write(sse_data(event))
    if done:
        await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _fail_after(asked: Asked, events: list[object], error: object) -> list[object]:
    after = asked.knob("error-after")
    return events if after is None else [*events[: int(after)], error]


class OpenAIStyle:
    def error(self, status: int, message: str, param: str | None = None) -> web.Response:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return json_reply(status, openai_error(message, kind, param=param))

    def undecodable(self) -> web.Response:
        message = (
            "Invalid file format. Supported formats: "
            "['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']"
        )
        return self.error(400, message, "file")

    def streams(self, asked: Asked) -> bool:
        return asked.model.startswith("gpt-4o") and asked.task == "transcribe"

    def reply(self, asked: Asked) -> web.Response:
        script, fmt = asked.script, asked.format
        modern = asked.model.startswith("gpt-4o")
        if modern and asked.task == "translate":
            return self.error(
                400, f"Model {asked.model} is not supported for translations.", "model"
            )
        if modern and fmt not in ("json", "text"):
            return self.error(
                400,
                f"response_format '{fmt}' is not compatible with model '{asked.model}'. "
                "Use 'json' or 'text'.",
                "response_format",
            )
        usage = {"type": "duration", "seconds": script.whole_seconds}
        if fmt == "json":
            body: JSON = {"text": script.text}
            if asked.task == "transcribe":
                body["usage"] = usage
            if modern and "logprobs" in asked.fields.getall("include[]", []):
                body["logprobs"] = [
                    {"token": w["word"], "logprob": -0.1, "bytes": list(w["word"].encode())}
                    for w in script.words
                ]
            return json_reply(200, body)
        if fmt == "text":
            return _text(script.text + "\n")
        if fmt == "srt":
            return _text(srt(script))
        if fmt == "vtt":
            return _text(vtt(script))
        if fmt == "verbose_json":
            return json_reply(200, self._verbose(asked, usage))
        return self.error(400, f"Invalid response_format '{fmt}'.", "response_format")

    def _verbose(self, asked: Asked, usage: JSON) -> JSON:
        script = asked.script
        body: JSON = {
            "task": asked.task,
            "language": script.language_name,
            "duration": round(script.duration, 3),
            "text": script.text,
        }
        granularities = asked.granularities()
        if "segment" in granularities:
            body["segments"] = script.segments
        if "word" in granularities:
            body["words"] = script.words
        if asked.task == "transcribe":
            body["usage"] = usage
        return body

    async def stream(self, request: web.Request, asked: Asked) -> web.StreamResponse:
        script = asked.script
        events: list[object] = [
            {"type": "transcript.text.delta", "delta": w["word"] if i == 0 else " " + w["word"]}
            for i, w in enumerate(script.words)
        ]
        output = len(events)
        audio = script.whole_seconds * 10
        events.append(
            {
                "type": "transcript.text.done",
                "text": script.text,
                "usage": {
                    "type": "tokens",
                    "input_tokens": audio,
                    "input_token_details": {"text_tokens": 0, "audio_tokens": audio},
                    "output_tokens": output,
                    "total_tokens": audio + output,
                },
            }
        )
        error = openai_error("The engine failed.", "server_error")
        return await _events(request, asked, _fail_after(asked, events, error), done=False)


class SpeachesStyle:
    def error(self, status: int, message: str) -> web.Response:
        return json_reply(status, {"detail": message})

    def undecodable(self) -> web.Response:
        return self.error(415, "Failed to decode audio. The provided file type is not supported.")

    def streams(self, asked: Asked) -> bool:
        return asked.task == "transcribe"

    def reply(self, asked: Asked) -> web.Response:
        script, fmt = asked.script, asked.format
        if fmt == "json":
            return json_reply(200, {"text": script.text})
        if fmt == "text":
            return _text(script.text)
        if fmt == "srt":
            return _text(srt(script))
        if fmt == "vtt":
            return _text(vtt(script), "text/vtt")
        if fmt == "verbose_json":
            words = "word" in asked.granularities(bracketed_only=True)
            return json_reply(
                200,
                {
                    "language": script.language,
                    "duration": script.duration,
                    "text": script.text,
                    "segments": script.segments,
                    "words": script.words if words else None,
                },
            )
        return self.error(422, "Input should be 'text', 'json', 'verbose_json', 'srt' or 'vtt'")

    async def stream(self, request: web.Request, asked: Asked) -> web.StreamResponse:
        script = asked.script
        events: list[object] = [
            {"type": "transcript.text.delta", "delta": s["text"], "logprobs": None}
            for s in script.segments
        ]
        events.append({"type": "transcript.text.done", "text": script.text, "logprobs": None})
        error = {"detail": "The engine failed."}
        return await _events(request, asked, _fail_after(asked, events, error), done=False)


class VllmStyle:
    def error(self, status: int, message: str) -> web.Response:
        kind = "BadRequestError" if status < 500 else "InternalServerError"
        return json_reply(status, openai_error(message, kind, code=status))

    def undecodable(self) -> web.Response:
        return self.error(400, "Invalid or unsupported audio file.")

    def streams(self, asked: Asked) -> bool:
        return asked.format != "verbose_json"

    def reply(self, asked: Asked) -> web.Response:
        script, fmt = asked.script, asked.format
        if fmt in ("json", "text"):
            body: JSON = {"text": script.text}
            if asked.task == "transcribe":
                body["usage"] = {"type": "duration", "seconds": script.whole_seconds}
            return json_reply(200, body)
        if fmt == "verbose_json":
            segments = [{**s, "no_speech_prob": None} for s in script.segments]
            return json_reply(
                200,
                {
                    "duration": str(script.duration),
                    "language": script.language,
                    "text": script.text,
                    "segments": segments,
                    "words": None,
                },
            )
        return self.error(
            400, "Currently only support response_format `text`, `json` or `verbose_json`"
        )

    async def stream(self, request: web.Request, asked: Asked) -> web.StreamResponse:
        if asked.format == "verbose_json":
            return self.error(400, "verbose_json is not supported with streaming")
        kind = "transcription" if asked.task == "transcribe" else "translation"
        head = {
            "id": f"{'trsc' if kind == 'transcription' else 'trsl'}-fake1",
            "object": f"{kind}.chunk",
            "created": int(time.time()),
            "model": asked.model,
        }
        words = asked.script.words
        events: list[object] = [
            {
                **head,
                "choices": [
                    {
                        "delta": {"content": w["word"] if i == 0 else " " + w["word"]},
                        "finish_reason": None,
                        "stop_reason": None,
                    }
                ],
            }
            for i, w in enumerate(words)
        ]
        events.append(
            {**head, "choices": [{"delta": {}, "finish_reason": "stop", "stop_reason": None}]}
        )
        if asked.fields.get("stream_include_usage") == "true":
            audio = asked.script.whole_seconds * 10
            events.append(
                {
                    **head,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": audio,
                        "completion_tokens": len(words),
                        "total_tokens": audio + len(words),
                    },
                }
            )
        error = openai_error("The engine failed.", "InternalServerError", code=500)
        return await _events(request, asked, _fail_after(asked, events, error), done=True)


Style = OpenAIStyle | SpeachesStyle | VllmStyle
STYLES: dict[str, Any] = {"openai": OpenAIStyle(), "speaches": SpeachesStyle(), "vllm": VllmStyle()}
