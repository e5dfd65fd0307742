"""POST /v1/audio/voices (clone a voice) and DELETE /v1/audio/voices/{voice_id}.

Cloning: the multipart form is read by ``uploads.read_form`` (the one reader of every
upload, with its caps; 415 for another content type) with the clip capped (413). It
takes the spec's field names or OpenAI's (``client.audio.voices.create``): ``model`` in
the query or the form; ``label`` or ``name``; ``file`` or ``audio_sample``; optional
``transcript``, ``consent`` (recorded with the clone) and ``type`` (``audio_sample``
only). The clip's container is sniffed and its duration measured by decoding
(``audio.probe``), and must be 3 to 60 seconds: all before any engine call. A clip longer
than the engine takes (``engine_clip_seconds``) is cut to that length as WAV, and its
transcript is then not sent (it would no longer match). The engine gets the name
``g<group id>__<label>``; the registry keeps the engine's spelling of it. The reply
speaks both vocabularies: ``label`` and ``name``, ``builtin`` and ``type``.

Deleting: a clone-shaped id of another group (in any spelling, ``domain.voices``) and a
built-in voice are 403; an id of the caller's group that the registry does not have is
404. The engine's copy is deleted, then the registry entry, even when the engine had
already lost the voice. When the engine fails to delete it, the registry entry stays (so
the voice is never forgotten while the engine may still hold it: each later deletion, the
caller's or the operator's, tries the engine again) and a ``parley.voices`` warning
names the clone and the channel. The reply is OpenAI's ``audio.voice.deleted``.

Both go through the runner (admitted against the request rate, metered at no cost).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from multidict import MultiDict

from parley.api.reply import json_reply
from parley.api.uploads import Form, read_form
from parley.api.voices import model_param, not_local_tts
from parley.audio import AudioInfo
from parley.audio.errors import AudioError
from parley.domain.models import Resolved
from parley.domain.speech import MAX_CLIP_SECONDS, MIN_CLIP_SECONDS, SpeechProfile
from parley.domain.usage import NOTHING, Allowance, Usage
from parley.domain.voices import LABEL_RULE, Clone, clone_id, clone_owner, valid_label
from parley.errors import (
    AlreadyExists,
    InvalidRequest,
    NotFound,
    ParleyError,
    PermissionDenied,
    UpstreamError,
    UpstreamRefused,
)
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import caller, services
from parley.pipeline.job import Operation
from parley.pipeline.precheck import refuse_before_upload
from parley.pipeline.relay import relay
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.providers.base import VoiceClip, VoicesUnsupported
from parley.store.base import Conflict

CLONE = Operation(name="voice cloning", path="/v1/audio/voices", kinds=frozenset({"speech"}))
DELETE = Operation(name="voice deletion", path="/v1/audio/voices", kinds=frozenset({"speech"}))
MEDIA_TYPES = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "mp4": "audio/mp4",
    "ogg": "audio/ogg",
    "webm": "audio/webm",
    "flac": "audio/flac",
}
FILE_FIELDS = ("file", "audio_sample")
"""The clip's part, under the spec's name or OpenAI's."""
MAX_CONSENT_CHARS = 300
log = logging.getLogger("parley.voices")


def _voices_model(model: Resolved) -> SpeechProfile:
    profile = model.spec.speech
    if profile is None or not profile.voice_listing:
        raise not_local_tts(model.requested)
    return profile


def _moved_on(channel: str) -> UpstreamRefused:
    return UpstreamRefused(
        f"The upstream channel `{channel}` does not hold this voice.",
        upstream_status=503,
        retryable=True,
    )


# cloning


@dataclass(frozen=True, slots=True)
class CloneForm:
    """A checked clone form: the clip measured, every 400 of the form already raised."""

    model: str
    label: str
    audio: bytes
    info: AudioInfo
    transcript: str | None
    consent: str | None


async def create_voice(request: web.Request) -> web.StreamResponse:
    svc = services(request)
    await refuse_before_upload(request)  # an over-limit caller's clip is never read
    cap = _upload_cap(svc, request.query.get("model"))
    form = await read_form(request, cap, FILE_FIELDS)
    try:
        asked = await _clone_form(request, form)
    finally:
        form.close()
    return await runner.reply(request, CloneJob(svc, caller(request), asked))


async def _clone_form(request: web.Request, form: Form) -> CloneForm:
    fields = form.fields
    model = model_param(request, fields.get("model"))
    label = _either(fields, "label", "name")
    if not label:
        raise InvalidRequest("Missing required parameter: 'label' (or 'name').", param="label")
    if fields.get("type", "audio_sample") != "audio_sample":
        raise InvalidRequest(
            "Voices are cloned from an audio sample only: 'type' must be 'audio_sample'.",
            param="type",
            code="unsupported_voice_type",
        )
    consent = fields.get("consent") or None
    if consent is not None and len(consent) > MAX_CONSENT_CHARS:
        raise InvalidRequest(
            f"'consent' is longer than {MAX_CONSENT_CHARS} characters.", param="consent"
        )
    if form.file is None:
        raise InvalidRequest(
            "Missing required parameter: 'file' (or 'audio_sample').", param="file"
        )
    audio = form.file.read()
    info = await services(request).probes.measure(caller(request).group.id, audio)
    if not MIN_CLIP_SECONDS <= info.seconds <= MAX_CLIP_SECONDS:
        raise InvalidRequest(
            f"The clip lasts {info.seconds:.2f} seconds; a reference clip must last "
            f"{MIN_CLIP_SECONDS:g} to {MAX_CLIP_SECONDS:g} seconds.",
            param=form.file_field,
            code="invalid_clip_duration",
        )
    transcript = fields.get("transcript") or None
    return CloneForm(model, label, audio, info, transcript, consent)


def _either(fields: MultiDict[str], ours: str, openais: str) -> str | None:
    """A field sent under the spec's name or OpenAI's; a 400 when the two disagree."""
    mine, theirs = fields.get(ours), fields.get(openais)
    if mine is not None and theirs is not None and mine != theirs:
        raise InvalidRequest(
            f"'{ours}' and '{openais}' are one field under two names, and they differ; send one.",
            param=openais,
        )
    return mine if mine is not None else theirs


def _upload_cap(svc: Services, model: str | None) -> int:
    """The largest clip the named model (or, before the form names one, any) accepts."""
    resolved = svc.models.resolve(model) if model else None
    if resolved is not None and resolved.spec.speech is not None:
        return resolved.spec.speech.max_clip_bytes
    caps = [spec.speech.max_clip_bytes for spec in svc.models.listed() if spec.speech]
    return max(caps, default=10_485_760)


class CloneJob:
    """One clone, as the runner's ``ReplyJob`` whose reply is the registered ``Clone``."""

    def __init__(self, svc: Services, who: Caller, asked: CloneForm) -> None:
        self._svc, self._caller, self._model = svc, who, asked.model
        self._label, self._audio, self._info = asked.label, asked.audio, asked.info
        self._transcript, self._consent = asked.transcript, asked.consent
        self._profile = SpeechProfile()
        self._spec_name = asked.model

    @property
    def operation(self) -> Operation:
        return CLONE

    @property
    def model(self) -> str:
        return self._model

    def accept(self, model: Resolved) -> None:
        self._profile, self._spec_name = _voices_model(model), model.spec.name
        if not self._profile.cloning:
            raise InvalidRequest(
                f"The model `{self._model}` cannot clone voices.",
                param="model",
                code="cloning_not_supported",
            )
        if not valid_label(self._label):
            raise InvalidRequest(f"'label' must be {LABEL_RULE}.", param="label")
        voice_id = clone_id(self._caller.group.id, self._label)
        if self._svc.clones.get(self._spec_name, voice_id) is not None:
            raise _taken(voice_id)

    def reservation(self, model: Resolved, who: Caller) -> int:
        return 0

    def allowance(self, model: Resolved) -> Allowance:
        return NOTHING

    async def call(self, route: Route) -> Clone:
        voice_id = clone_id(self._caller.group.id, self._label)
        if await self._svc.clones.find(self._spec_name, voice_id, self._caller.group.id):
            raise _taken(voice_id)  # made on another instance since the last refresh
        audio, media_type, transcript = await self._clip()
        consent = self._consent or f"parley-g{self._caller.group.id}"  # engines require one
        clip = VoiceClip(voice_id, audio, media_type, consent, transcript)
        adapter = self._svc.providers.voices(route.provider_type)
        try:
            engine_name = await adapter.create_voice(route.target, clip)
        except VoicesUnsupported:
            raise InvalidRequest(
                f"The model `{self._model}` cannot clone voices.", param="model"
            ) from None
        clone = Clone(
            group_id=self._caller.group.id,
            model=self._spec_name,
            label=self._label,
            voice_id=voice_id,
            engine_name=engine_name,
            channel=route.target.channel,
            duration_ms=self._info.milliseconds,
            created_at=datetime.now(UTC),
            transcript=self._transcript,
            consent=self._consent,
        )
        try:
            return await self._svc.clones.add(clone)
        except Conflict:
            raise _taken(voice_id) from None

    async def _clip(self) -> tuple[bytes, str, str | None]:
        """The clip, its media type and the transcript to send (where the model uses it)."""
        transcript = self._transcript if self._profile.transcript_cloning else None
        longest = self._profile.engine_clip_seconds
        if longest is None or self._info.seconds <= longest:
            return self._audio, MEDIA_TYPES[str(self._info.container)], transcript
        try:
            trimmed = await asyncio.to_thread(_trimmed, self._audio, longest)
        except AudioError:
            raise InvalidRequest("The clip cannot be decoded.", param="file") from None
        return trimmed, "audio/wav", None

    def usage(self, reply: Clone) -> Usage:
        return Usage()

    def render(self, reply: Clone, call: Call, usage: Usage) -> web.StreamResponse:
        record: dict[str, Any] = reply.record(ready=self._profile.status_on_every_voice)
        record.update(
            name=reply.label,
            object="audio.voice",
            type="audio_sample",
            model=reply.model,
            created_at=int(reply.created_at.timestamp()),
            duration_seconds=round(reply.duration_ms / 1000, 3),
        )
        return json_reply(record)


def _trimmed(data: bytes, seconds: float) -> bytes:
    """``trim_to_wav``; PyAV (about 16 MB of every worker) is loaded on the first long clip."""
    from parley.audio.convert import trim_to_wav  # PyAV, on first use

    return trim_to_wav(data, seconds)


def _taken(voice_id: str) -> AlreadyExists:
    return AlreadyExists(
        f"Your group already has a voice `{voice_id}` on this model (labels ignore case).",
        param="label",
        code="voice_exists",
    )


# deleting


async def delete_voice(request: web.Request) -> web.StreamResponse:
    job = DeleteJob(
        services(request),
        caller(request).group.id,
        model_param(request),
        request.match_info["voice_id"],
    )
    return await runner.reply(request, job)


async def delete_registered(svc: Services, clone: Clone) -> Clone:
    """Delete a registered clone for the operator: the same ``DeleteJob`` over the
    model's routes (its engine, then the registry), without a caller to admit or meter."""
    model = svc.models.resolve(clone.model)
    if model is None:
        raise NotFound(
            f"The model `{clone.model}` is no longer configured, so its engine cannot be "
            "reached to delete the voice.",
            param="model",
        )
    job = DeleteJob(svc, clone.group_id, clone.model, clone.voice_id)
    job.accept(model)
    found, _ = await relay(svc.router.routes(model.spec.name), job.call, model.spec.name)
    return found


class DeleteJob:
    """One deletion, as the runner's ``ReplyJob`` whose reply is the deleted ``Clone``."""

    def __init__(self, svc: Services, group_id: int, model: str, voice_id: str) -> None:
        self._svc, self._group_id, self._model, self._voice_id = svc, group_id, model, voice_id
        self._profile = SpeechProfile()
        self._spec_name = model

    @property
    def operation(self) -> Operation:
        return DELETE

    @property
    def model(self) -> str:
        return self._model

    def accept(self, model: Resolved) -> None:
        self._profile, self._spec_name = _voices_model(model), model.spec.name
        owner = clone_owner(self._voice_id)
        if owner is not None and owner != self._group_id:
            raise _refused(self._voice_id)

    def reservation(self, model: Resolved, who: Caller) -> int:
        return 0

    def allowance(self, model: Resolved) -> Allowance:
        return NOTHING

    async def call(self, route: Route) -> Clone:
        if clone_owner(self._voice_id) is None:
            raise await self._not_a_clone()
        clone = await self._svc.clones.find(self._spec_name, self._voice_id, self._group_id)
        if clone is None:
            raise NotFound(
                f"The voice `{self._voice_id}` does not exist.",
                param="voice_id",
                code="voice_not_found",
            )
        if clone.channel != route.target.channel:
            raise _moved_on(route.target.channel)
        adapter = self._svc.providers.voices(route.provider_type)
        try:
            await adapter.delete_voice(route.target, clone.engine_name)
        except UpstreamError as error:
            log.warning(
                "voice deletion %s (%s): the engine of channel `%s` did not delete it (%s); "
                "the clone stays registered to its group until a deletion succeeds",
                clone.voice_id,
                clone.model,
                route.target.channel,
                error.message,
            )
            raise
        await self._svc.clones.remove(clone)
        return clone

    async def _not_a_clone(self) -> ParleyError:
        """403 for a built-in voice, 404 for an id nobody has."""
        routes = self._svc.router.routes(self._spec_name)
        known = await self._svc.rosters.builtin(self._spec_name, routes) or frozenset()
        if self._voice_id in known or self._profile.catalogue.get(self._voice_id) is not None:
            return _refused(self._voice_id)
        return NotFound(
            f"The voice `{self._voice_id}` does not exist.",
            param="voice_id",
            code="voice_not_found",
        )

    def usage(self, reply: Clone) -> Usage:
        return Usage()

    def render(self, reply: Clone, call: Call, usage: Usage) -> web.StreamResponse:
        return json_reply({"id": reply.voice_id, "object": "audio.voice.deleted", "deleted": True})


def _refused(voice_id: str) -> PermissionDenied:
    return PermissionDenied(
        f"The voice `{voice_id}` is not one your group created; only your group's clones "
        "can be deleted.",
        param="voice_id",
    )
