"""POST /v1/audio/speech: text to audio, relayed as the engine makes it (raw or SSE).

The handler checks the body, then hands a ``SpeechJob`` to the runner, which admits,
routes, relays and meters it. The job chooses the engine's voice for each route: a
clone-shaped id (in any spelling an engine may fold to one, ``domain.voices``) is only
ever the caller's own registered clone, sent under the engine's name for it; any other
clone-shaped id, a clone's own name at the engine (a hosted engine's voice id), or a
voice the engine does not have, becomes the model's default voice and is never sent,
whether or not the engine's roster can be read. It calls the
adapter, converts the audio to the caller's format as it arrives (``audio.convert``),
and frames it: raw bytes, or ``speech.audio.delta`` events closed by
``speech.audio.done`` with usage. It is billed per input character
(``per_1k_characters``) once any audio reached the caller; rate limits count the input
at ``domain.speech.CHARACTERS_PER_TOKEN`` characters a token.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from aiohttp import web

from parley.api.body import optional_bool, optional_number, read_json, required_string
from parley.audio.errors import AudioError
from parley.domain.models import Resolved
from parley.domain.speech import (
    FALLBACK_FORMATS,
    MEDIA_TYPES,
    SERVED_FORMATS,
    SpeechProfile,
    character_tokens,
)
from parley.domain.usage import Allowance, Usage
from parley.domain.voices import clone_owner
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError, UpstreamError, UpstreamRefused
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.context import caller, services
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.providers.base import SpeechAudio, SpeechRequest
from parley.sse import json_event

if TYPE_CHECKING:
    from parley.audio.convert import AudioConverter

SPEECH = Operation(name="speech", path="/v1/audio/speech", kinds=frozenset({"speech"}))
QUALITIES = ("standard", "high", "max")
RATE_FORMATS = frozenset({"pcm", "wav"})
"""The formats whose samples a reply's ``x-sample-rate`` describes (16-bit mono PCM)."""
Batches = AsyncIterator[Sequence[bytes]]


def _converter(source: str, target: str, rate: int) -> AudioConverter:
    """The converter; PyAV (about 16 MB of every worker) is loaded on the first speech call."""
    from parley.audio.convert import AudioConverter  # PyAV, on first use

    return AudioConverter(source, target, sample_rate=rate)


def _voice(body: JSON) -> str | None:
    voice = body.get("voice")
    if isinstance(voice, dict):
        voice = voice.get("id")
    if voice is None:
        return None
    if not isinstance(voice, str) or not voice:
        raise InvalidRequest(
            "'voice' must be a voice id string or an object with an 'id'.", param="voice"
        )
    return voice


def _sse(body: JSON) -> bool:
    stream_format = body.get("stream_format")
    if stream_format not in (None, "sse", "audio"):
        raise InvalidRequest("'stream_format' must be 'sse' or 'audio'.", param="stream_format")
    return stream_format == "sse" or (optional_bool(body, "stream") and stream_format is None)


def _optional_string(body: JSON, name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidRequest(f"'{name}' must be a string.", param=name)
    return value


async def create_speech(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    job = SpeechJob(services(request), caller(request), body)
    return await runner.stream(request, job)


class SpeechJob:
    """One speech call, as the runner's ``StreamJob`` of audio pieces."""

    whole = None

    def __init__(self, svc: Services, who: Caller, body: JSON) -> None:
        self._svc = svc
        self._caller = who
        self._model = required_string(body, "model")
        self._input = required_string(body, "input")
        self._voice = _voice(body)
        self._asked_format = _optional_string(body, "response_format") or "wav"
        self._speed = optional_number(body, "speed", 0.25, 4.0) or 1.0
        self._quality = _optional_string(body, "quality")
        self._instruction_field = "instructions" if "instructions" in body else "instruction"
        self._instruction = _optional_string(body, self._instruction_field)
        self._sse = _sse(body)
        self._format = "wav"
        self._profile = SpeechProfile()
        self._resolved: Resolved | None = None
        self._delivered = False
        self._engine_usage: JSON | None = None
        self.reply_headers: dict[str, str] = {}
        """``x-sample-rate`` once the engine answered, for ``pcm`` and ``wav``."""

    # what the runner asks first

    @property
    def operation(self) -> Operation:
        return SPEECH

    @property
    def model(self) -> str:
        return self._model

    def accept(self, model: Resolved) -> None:
        profile = model.spec.speech or SpeechProfile()
        self._resolved, self._profile = model, profile
        self._format = self._served_format(profile)
        if len(self._input) > profile.max_input_chars:
            raise InvalidRequest(
                f"'input' is {len(self._input)} characters long; the model `{self._model}` "
                f"takes at most {profile.max_input_chars}.",
                param="input",
                code="string_above_max_length",
            )
        if self._quality is not None and self._quality not in profile.quality_steps:
            levels = ", ".join(sorted(profile.quality_steps)) or "none: it takes no 'quality'"
            raise InvalidRequest(
                f"'quality' `{self._quality}` is not supported by the model `{self._model}` "
                f"(levels: {levels}).",
                param="quality",
            )
        if self._instruction is not None and not profile.instruction:
            raise InvalidRequest(
                f"'{self._instruction_field}' is not supported by the model `{self._model}`.",
                param=self._instruction_field,
            )

    def _served_format(self, profile: SpeechProfile) -> str:
        asked = self._asked_format
        if asked in SERVED_FORMATS:
            return asked
        if asked in FALLBACK_FORMATS and profile.fallback_to_wav:
            return "wav"
        raise InvalidRequest(
            f"'response_format' `{asked}` is not supported by the model `{self._model}`; "
            "use wav, mp3 or pcm.",
            param="response_format",
            code="unsupported_response_format",
        )

    def reservation(self, model: Resolved, who: Caller) -> int:
        return character_tokens(len(self._input))

    def allowance(self, model: Resolved) -> Allowance:
        characters = len(self._input)  # billed exactly: known from the request
        return Allowance(prompt_tokens=character_tokens(characters), characters=characters)

    # the stream

    @property
    def content_type(self) -> str:
        return "text/event-stream" if self._sse else MEDIA_TYPES[self._format]

    @asynccontextmanager
    async def open(self, route: Route) -> AsyncIterator[Batches]:
        request = SpeechRequest(
            input=self._input,
            voice=await self._engine_voice(route),
            response_format=self._format,
            speed=self._speed,
            instructions=self._instruction,
            steps=self._steps(),
            language=self._language(),
            sse=self._sse,
            sample_rate=self._profile.sample_rate,
        )
        adapter = self._svc.providers.speech(route.provider_type)
        async with adapter.speech(route.target, request) as audio:
            rate = audio.sample_rate or self._profile.sample_rate
            if self._format in RATE_FORMATS:  # raw pcm has no header to say it
                self.reply_headers = {"x-sample-rate": str(rate)}
            converter = _converter(audio.format, self._format, rate)
            batches = self._batches(audio, converter, route.target.channel)
            try:
                yield batches
            finally:
                await batches.aclose()

    async def _batches(
        self, audio: SpeechAudio, converter: AudioConverter, channel: str
    ) -> AsyncGenerator[list[bytes], None]:
        try:
            async for piece in audio.pieces:
                converted = converter.feed(piece)
                if converted:
                    yield [converted]
            tail = converter.finish()
        except AudioError:
            raise UpstreamError(
                f"The upstream channel `{channel}` sent audio Parley cannot convert."
            ) from None
        self._engine_usage = audio.usage
        if tail:
            yield [tail]

    def render(self, batch: Sequence[bytes]) -> bytes:
        self._delivered = True
        if not self._sse:
            return b"".join(batch)
        return b"".join(_event("speech.audio.delta", {"audio": _b64(piece)}) for piece in batch)

    def end(self) -> bytes:
        if not self._sse:
            return b""
        return _event("speech.audio.done", {"usage": self._usage_fields()})

    def failure(self, error: ParleyError) -> bytes | None:
        if not self._sse:
            return None
        return _event("speech.audio.error", error.body())

    def delivered(self) -> Usage | None:
        if not self._delivered:
            return None
        characters = len(self._input)
        return Usage(prompt_tokens=character_tokens(characters), characters=characters)

    # choices made per route

    async def _engine_voice(self, route: Route) -> str | None:
        """The voice's engine name, or the default for any voice this caller may not use.
        A voice the roster cannot vouch for is passed through only when not clone-shaped."""
        default, requested = self._profile.default_voice, self._voice
        if requested is None:
            return default
        model = self._spec_name()
        owner = clone_owner(requested)
        if owner is not None:
            if owner != self._caller.group.id:
                return default  # another group's clone is a voice that does not exist
            clone = await self._svc.clones.find(model, requested, owner)
            if clone is None:
                return default
            if clone.channel != route.target.channel:
                raise UpstreamRefused(
                    f"The upstream channel `{route.target.channel}` does not hold this voice.",
                    upstream_status=503,
                    retryable=True,
                )
            return clone.engine_name
        if self._svc.clones.is_engine_name(model, requested):
            return default  # a clone's engine id (hosted engines) is no voice to callers
        known = None
        if self._profile.voice_listing:
            known = await self._svc.rosters.builtin(model, self._svc.router.routes(model))
        if known is None and self._profile.catalogue.entries:
            known = frozenset(self._profile.catalogue.entries)
        if known is None or requested in known or requested.lower() in known:
            return requested
        return default

    def _steps(self) -> int | None:
        level = self._quality or self._profile.default_quality
        return self._profile.quality_steps.get(level) if level is not None else None

    def _language(self) -> str | None:
        voice = self._voice or self._profile.default_voice
        return self._profile.catalogue.lang(voice) if voice is not None else None

    def _spec_name(self) -> str:
        assert self._resolved is not None, "accept() runs before open()"
        return self._resolved.spec.name

    def _usage_fields(self) -> dict[str, Any]:
        characters = len(self._input)
        fields: dict[str, Any] = dict(self._engine_usage or {})
        if not isinstance(fields.get("input_tokens"), int):
            tokens = character_tokens(characters)
            fields = {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}
        fields["input_characters"] = characters
        return fields


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return json_event({"type": kind, **payload}, kind)


def _b64(piece: bytes) -> str:
    return base64.b64encode(piece).decode("ascii")
