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
404. A clone of the caller's is retired: out of the registry at once (never listed nor
used again) and recorded as still to delete on its engine, in one transaction; then the
engine's copy is deleted (``voices/deletions.py``), which counts as done when the engine
had already lost the voice. When the engine fails (an error, a timeout, its channel
gone), the deletion stays recorded, with its error, and the background loop tries again
until the engine deletes it or an operator gives it up; meanwhile the id is not cloned
again (409 ``voice_deletion_pending``). The caller's reply is OpenAI's
``audio.voice.deleted`` either way: for the caller, the voice is gone.

Both go through the runner (admitted against the request rate, metered at no cost).
"""

from __future__ import annotations

import asyncio
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
from parley.domain.voices import (
    LABEL_RULE,
    Clone,
    Deleted,
    clone_id,
    clone_owner,
    valid_label,
)
from parley.errors import (
    AlreadyExists,
    InvalidRequest,
    NotFound,
    ParleyError,
    PermissionDenied,
)
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import caller, services
from parley.pipeline.job import Operation
from parley.pipeline.precheck import refuse_before_upload
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.providers.base import VOICES, VoiceClip, VoicesUnsupported
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


def _voices_model(model: Resolved) -> SpeechProfile:
    profile = model.spec.speech
    if profile is None or not profile.voice_listing:
        raise not_local_tts(model.requested)
    return profile


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
        voice_id, group_id = clone_id(self._caller.group.id, self._label), self._caller.group.id
        if await self._svc.clones.find(self._spec_name, voice_id, group_id):
            raise _taken(voice_id)  # made on another instance since the last refresh
        if await self._svc.clones.deletion_pending(self._spec_name, voice_id, group_id):
            raise _still_deleting(voice_id)
        audio, media_type, transcript = await self._clip()
        consent = self._consent or f"parley-g{self._caller.group.id}"  # engines require one
        clip = VoiceClip(voice_id, audio, media_type, consent, transcript)
        adapter = self._svc.providers.serving(VOICES, route.provider_type)
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


def _still_deleting(voice_id: str) -> AlreadyExists:
    return AlreadyExists(
        f"Your group deleted a voice `{voice_id}` on this model that its engine has not "
        "deleted yet; the label can be cloned again once it has.",
        param="label",
        code="voice_deletion_pending",
    )


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


async def retire(svc: Services, clone: Clone) -> Deleted:
    """Take the clone out of the registry, then delete it on its engine once now; what
    the engine did not delete stays recorded for the background loop. ``DeleteJob``'s
    work, and the operator's deletion as it is (without a caller to admit or meter, nor
    a model that must still be configured: a channel that cannot be reached leaves the
    deletion recorded, with that error)."""
    deletions = svc.deletions
    now = deletions.clock() if deletions is not None else datetime.now(UTC)
    claimed_until = deletions.claimed_until(now) if deletions is not None else now
    pending = await svc.clones.retire(clone, now, claimed_until)
    if pending is not None and deletions is not None:
        pending = await deletions.attempt(pending)
    return Deleted(clone, pending)


class DeleteJob:
    """One deletion, as the runner's ``ReplyJob`` whose reply is the ``Deleted`` clone.

    The route only admits the call: the engine is reached on the clone's own channel
    wherever the model's routes would lead (``voices/deletions.py``), so a deletion
    never waits for a breaker to close nor falls over to a channel without the voice."""

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

    async def call(self, route: Route) -> Deleted:
        if clone_owner(self._voice_id) is None:
            raise await self._not_a_clone()
        clone = await self._svc.clones.find(self._spec_name, self._voice_id, self._group_id)
        if clone is None:
            raise NotFound(
                f"The voice `{self._voice_id}` does not exist.",
                param="voice_id",
                code="voice_not_found",
            )
        return await retire(self._svc, clone)

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

    def usage(self, reply: Deleted) -> Usage:
        return Usage()

    def render(self, reply: Deleted, call: Call, usage: Usage) -> web.StreamResponse:
        voice_id = reply.clone.voice_id
        return json_reply({"id": voice_id, "object": "audio.voice.deleted", "deleted": True})


def _refused(voice_id: str) -> PermissionDenied:
    return PermissionDenied(
        f"The voice `{voice_id}` is not one your group created; only your group's clones "
        "can be deleted.",
        param="voice_id",
    )
