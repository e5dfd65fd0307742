"""POST /v1/audio/transcriptions and POST /v1/audio/translations.

The form is read (the file spooled, 413 past ``server.max_audio_bytes``), checked, and
the file sniffed and measured on the audio threads in the caller's group's turn
(``transcription_form``, ``Services.probes``), all before any engine is called.
The call then takes the runner's path like every other (``pipeline/runner.py``); the
jobs below only check the model's abilities, call the adapter and render OpenAI's shapes.

``stream=true`` on a model that does not stream (``models[].transcription.stream``) is
ignored, as OpenAI ignores it for whisper-1: the reply is whole and carries
``x-parley-stream: ignored``. Translations are never streamed (400).

Billing is Parley's own: every started second of the measured clip (at least one), at
the model's ``per_minute`` price. The engine's own ``usage.seconds`` (or ``duration``) is
written to
the ``parley.audio`` log beside Parley's measure, never billed. A call that fails upstream
costs nothing; a stream costs its clip once something was relayed and the upstream did
not fail.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

import orjson
from aiohttp import web

from parley.api.transcription_form import SpeechToText, speech_to_text
from parley.api.uploads import read_form
from parley.domain.models import Resolved
from parley.domain.transcripts import Task, billed_seconds
from parley.domain.usage import Allowance, Usage
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError, UpstreamError, encode_error_event
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import caller, services
from parley.pipeline.job import NO_HEADERS, Batches, Operation
from parley.pipeline.precheck import refuse_before_upload
from parley.pipeline.route import Route
from parley.providers.base import TRANSCRIPTION, Transcript
from parley.providers.registry import ProviderRegistry
from parley.sse import json_event

log = logging.getLogger("parley.audio")

KINDS = frozenset({"transcription"})
OPERATIONS: dict[Task, Operation] = {
    "transcribe": Operation("transcriptions", "/v1/audio/transcriptions", KINDS),
    "translate": Operation("translations", "/v1/audio/translations", KINDS),
}
SECONDS_HEADER = "x-parley-audio-seconds"
"""Parley's measure of the clip, in seconds (three decimals), on every reply."""
STREAM_HEADER = "x-parley-stream"
"""``ignored`` on a whole reply to ``stream=true`` for a model that does not stream."""


async def create_transcription(request: web.Request) -> web.StreamResponse:
    return await _serve(request, "transcribe")


async def create_translation(request: web.Request) -> web.StreamResponse:
    return await _serve(request, "translate")


async def _serve(request: web.Request, task: Task) -> web.StreamResponse:
    svc = services(request)
    await refuse_before_upload(request)  # an over-limit caller's upload is never read
    form = await read_form(request, svc.settings.server.max_audio_bytes)
    try:
        asked = await speech_to_text(form, task, svc.probes, caller(request).group.id)
        if asked.stream:
            return await runner.stream(request, StreamedTranscription(asked, svc.providers))
        return await runner.reply(request, WholeTranscription(asked, svc.providers))
    finally:
        form.close()


class TranscriptionJob:
    """What both jobs share: the model's abilities checked, no tokens reserved."""

    def __init__(self, asked: SpeechToText, providers: ProviderRegistry) -> None:
        self.asked = asked
        self.providers = providers
        self.billed = billed_seconds(asked.audio.seconds)

    @property
    def operation(self) -> Operation:
        return OPERATIONS[self.asked.task]

    @property
    def model(self) -> str:
        return self.asked.model

    def accept(self, model: Resolved) -> None:
        check_abilities(model, self.asked)

    def reservation(self, model: Resolved, caller: Caller) -> int:
        return 0

    def allowance(self, model: Resolved) -> Allowance:
        return Allowance(audio_ms=self.billed * 1000)  # the clip, measured before admission

    def usage_for_clip(self) -> Usage:
        return Usage(audio_ms=self.billed * 1000)

    @property
    def seconds_header(self) -> dict[str, str]:
        return {SECONDS_HEADER: f"{self.asked.audio.seconds:.3f}"}

    def stated_usage(self) -> JSON:
        return {"type": "duration", "seconds": self.billed}


def check_abilities(model: Resolved, asked: SpeechToText) -> None:
    """The model declared what is asked of it (``models[].transcription``)."""
    abilities = model.spec.transcription
    name = model.requested
    if abilities is None:  # a transcription model always has them; be safe
        raise InvalidRequest(f"The model `{name}` does not transcribe.", param="model")
    if asked.task == "translate" and not abilities.translate:
        raise InvalidRequest(
            f"The model `{name}` cannot translate speech to English; "
            "use a model that lists translate among its abilities (GET /v1/models).",
            param="model",
            code="translation_not_supported",
        )
    if asked.response_format not in abilities.formats:
        raise InvalidRequest(
            f"The model `{name}` does not answer in '{asked.response_format}'; "
            f"it answers in {', '.join(abilities.formats)}.",
            param="response_format",
        )


class WholeTranscription(TranscriptionJob):
    """One reply: the adapter's OpenAI-shaped body, with Parley's usage stated; it says
    so in ``STREAM_HEADER`` when it answers a stream the model cannot give."""

    def __init__(
        self, asked: SpeechToText, providers: ProviderRegistry, *, stream_ignored: bool = False
    ) -> None:
        super().__init__(asked, providers)
        self._headers = self.seconds_header
        if stream_ignored:
            self._headers[STREAM_HEADER] = "ignored"

    async def call(self, route: Route) -> Transcript:
        adapter = self.providers.serving(TRANSCRIPTION, route.provider_type)
        return await adapter.transcribe(route.target, self.asked.request)

    def usage(self, reply: Transcript) -> Usage:
        return self.usage_for_clip()

    def render(self, reply: Transcript, call: Call, usage: Usage) -> web.StreamResponse:
        self._log(call, reply.engine_seconds)
        body, fmt = reply.body, self.asked.response_format
        if isinstance(body, str):
            kind = "text/vtt" if fmt == "vtt" else "text/plain"
            return web.Response(
                text=body, content_type=kind, charset="utf-8", headers=self._headers
            )
        payload = dict(body)
        if fmt == "verbose_json" and payload.get("duration") is None:
            payload["duration"] = round(self.asked.audio.seconds, 3)
        if self.asked.task == "transcribe":
            payload["usage"] = self.stated_usage()
        return web.Response(
            body=orjson.dumps(payload),
            content_type="application/json",
            headers=self._headers,
        )

    def _log(self, call: Call, engine: float | None) -> None:
        measured = self.asked.audio.seconds
        log.info(
            "audio %s %s: measured %.3f s, billed %d s, engine reported %s",
            call.request_id,
            call.model.spec.name,
            measured,
            self.billed,
            "nothing" if engine is None else f"{engine:g} s",
        )
        if engine is not None and abs(engine - measured) > 1 + measured / 10:
            log.warning(
                "audio %s: the engine's %g s differs from Parley's %.3f s; billed Parley's",
                call.request_id,
                engine,
                measured,
            )


class StreamedTranscription(TranscriptionJob):
    """OpenAI's transcript events; the done event states Parley's usage."""

    content_type = "text/event-stream"
    reply_headers = NO_HEADERS

    def __init__(self, asked: SpeechToText, providers: ProviderRegistry) -> None:
        super().__init__(asked, providers)
        self._relayed = False
        self._upstream_failed = False
        self.whole: WholeTranscription | None = None
        """The whole reply that answers instead on a model that does not stream
        (``models[].transcription.stream``), as OpenAI answers whisper-1 whole."""

    def accept(self, model: Resolved) -> None:
        super().accept(model)
        abilities = model.spec.transcription
        self.whole = None
        if abilities is not None and not abilities.stream:
            ignored = dataclasses.replace(self.asked, stream=False)
            self.whole = WholeTranscription(ignored, self.providers, stream_ignored=True)

    def open(self, route: Route) -> AbstractAsyncContextManager[Batches[JSON]]:
        adapter = self.providers.serving(TRANSCRIPTION, route.provider_type)
        return adapter.transcribe_stream(route.target, self.asked.request)

    def render(self, batch: Sequence[JSON]) -> bytes:
        if not batch:
            return b""
        self._relayed = True
        events = []
        for event in batch:
            if event.get("type") == "transcript.text.done":
                event["usage"] = self.stated_usage()  # the adapter's own fresh dict
            events.append(json_event(event))
        return b"".join(events)

    def end(self) -> bytes:
        return b""  # OpenAI's transcript stream ends with its done event, no [DONE]

    def failure(self, error: ParleyError) -> bytes | None:
        if isinstance(error, UpstreamError):
            self._upstream_failed = True
        return encode_error_event(error)

    def delivered(self) -> Usage | None:
        if not self._relayed or self._upstream_failed:
            return None
        return self.usage_for_clip()
