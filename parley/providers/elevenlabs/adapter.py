"""``Speech``, ``Voices`` and ``Transcription`` for ElevenLabs (channel type ``elevenlabs``).

Every request carries the channel's key as ``xi-api-key``; the channel's ``base_url`` is
the API's root (``https://api.elevenlabs.io``, or a residency host).

Speech. ``POST /v1/text-to-speech/{voice_id}/stream`` for what can be played as it
comes (PCM, so also WAV, and any caller who asked for events), the plain form for a whole
MP3 file (as ``openai_audio`` asks a whole file for mp3); both are relayed as they arrive.
The JSON body is ``text``, ``model_id`` (the channel's upstream model) and
``voice_settings.speed`` (ElevenLabs takes 0.7 to 1.2: a speed outside is clamped), plus
``language_code`` for the models that take one (``*_v2_5``). ``output_format`` (a query
parameter) is ``mp3_44100_128`` for mp3 and ``pcm_<rate>`` for pcm and wav, at the
offered rate nearest the model's ``sample_rate``; Parley writes the WAV header itself.
What comes back is what ``output_format`` named (ElevenLabs makes exactly that; the
Content-Type of its pcm replies is not documented, so it is not read). A
call names a voice: ElevenLabs has no default one, so on a model without
``default_voice`` a call that names none gets the first built-in voice of the account's
first page of voices (one more call).

Voices. ``GET /v2/voices`` page by page (``next_page_token``): premade and library voices
are the built-in ones; the account's cloned and generated voices (Parley's clones among
them) are uploaded ones, never shown to a caller. A clone is made by instant voice
cloning, ``POST /v1/voices/add`` (multipart ``name``, one ``files`` part, ``description``
recording the consent); its ``voice_id`` is the engine's name for it, kept in Parley's
registry. ``DELETE /v1/voices/{voice_id}`` deletes it; an engine that no longer has it
answers 404 or ``voice_not_found``.

Transcription is Scribe (``elevenlabs.scribe``). Errors are
``{"detail": {"status", "message"}}`` (``status`` becomes the error's ``code``) or
FastAPI's validation list (422).
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

import orjson

from parley import upstream_json
from parley.domain.voices import clone_owner
from parley.errors import UpstreamError
from parley.http import Reply
from parley.http.multipart import FilePart, MultipartBody
from parley.providers.audio_replies import (
    EngineAdapter,
    handed_over,
    nearest_rate,
    no_voice,
    raw_pieces,
    within,
)
from parley.providers.base import (
    SPEECH,
    TRANSCRIPTION,
    VOICES,
    Batches,
    EngineRoster,
    Serves,
    SpeechAudio,
    SpeechRequest,
    Target,
    Transcript,
    TranscriptionRequest,
    VoiceClip,
    upstream_errors,
)
from parley.providers.elevenlabs import scribe
from parley.providers.elevenlabs.refusal import elevenlabs_refusal, says_voice_is_gone

KEY_HEADER = "xi-api-key"
TTS_PATH = "/v1/text-to-speech/"
VOICES_PATH = "/v2/voices"
ADD_VOICE_PATH = "/v1/voices/add"
VOICE_PATH = "/v1/voices/"
STT_PATH = "/v1/speech-to-text"
PCM_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)
MP3_FORMAT = "mp3_44100_128"
SLOWEST, FASTEST = 0.7, 1.2
PAGE_SIZE = 100
MAX_PAGES = 20
"""At most this many pages of voices are read (2,000 voices)."""
UPLOADED_CATEGORIES = frozenset({"cloned", "generated"})
"""Voices made in the account (by Parley or anyone else), never listed as built-in."""
LANGUAGE_MODELS_SUFFIX = "_v2_5"
"""ElevenLabs takes ``language_code`` only on its v2.5 models (else it is an error)."""


class ElevenLabsAdapter(EngineAdapter):
    __slots__ = ()
    serves: ClassVar[Serves] = (SPEECH, VOICES, TRANSCRIPTION)

    def _credentials(self, target: Target) -> dict[str, str]:
        """ElevenLabs' key (``xi-api-key``)."""
        return {KEY_HEADER: target.api_key} if target.api_key else {}

    async def _answer(self, target: Target, reply: Reply) -> Any:
        raw = await reply.read(self._bounds.max_reply_bytes)
        if reply.status >= 300:
            raise elevenlabs_refusal(target, reply.status, raw, reply.headers)
        return upstream_json.loads(raw)

    # speech

    @asynccontextmanager
    async def speech(self, target: Target, request: SpeechRequest) -> AsyncIterator[SpeechAudio]:
        voice = request.voice or await self._first_voice(target)
        output, fmt, rate = output_format(request)
        streamed = request.sse or fmt == "pcm"
        path = TTS_PATH + quote(voice, safe="") + ("/stream" if streamed else "")
        query = urlencode({"output_format": output})
        body = orjson.dumps(tts_body(target.model, request))
        with upstream_errors(target.channel):
            reply = await self._send(target, "POST", f"{path}?{query}", body, stream=True)
            if reply.status >= 300:
                raw = await reply.read(self._bounds.max_reply_bytes)
                raise elevenlabs_refusal(target, reply.status, raw, reply.headers)
        audio = SpeechAudio(fmt, raw_pieces(reply, target.channel), sample_rate=rate)
        async with handed_over(audio, reply) as handed:
            yield handed

    # voices

    async def _first_voice(self, target: Target) -> str:
        """The first built-in voice of the account's first page of voices: the voice of a
        call that names none on a model without ``default_voice``."""
        with upstream_errors(target.channel):
            query = urlencode({"page_size": str(PAGE_SIZE)})
            reply = await self._send(target, "GET", f"{VOICES_PATH}?{query}", b"")
            page = await self._answer(target, reply)
        builtin: list[str] = []
        for voice in page.get("voices") or () if isinstance(page, dict) else ():
            sort_voice(voice, builtin, [])
        if not builtin:
            raise no_voice()
        return builtin[0]

    async def list_voices(self, target: Target) -> EngineRoster:
        builtin: list[str] = []
        uploaded: list[str] = []
        token: str | None = None
        for _ in range(MAX_PAGES):
            query = {"page_size": str(PAGE_SIZE)}
            if token:
                query["next_page_token"] = token
            with upstream_errors(target.channel):
                reply = await self._send(target, "GET", f"{VOICES_PATH}?{urlencode(query)}", b"")
                page = await self._answer(target, reply)
            voices = page.get("voices") if isinstance(page, dict) else None
            if not isinstance(voices, list):
                raise UpstreamError(
                    f"The upstream channel `{target.channel}` sent a voice list Parley cannot read."
                )
            for voice in voices:
                sort_voice(voice, builtin, uploaded)
            token = page.get("next_page_token")
            if not page.get("has_more") or not isinstance(token, str) or not token:
                break
        return EngineRoster(builtin=tuple(builtin), uploaded=tuple(uploaded))

    async def create_voice(self, target: Target, clip: VoiceClip) -> str:
        fields = [
            ("name", clip.name),
            ("description", f"Cloned through Parley; consent: {clip.consent}"),
            ("remove_background_noise", "false"),
        ]
        sample = FilePart("files", "reference", clip.media_type, io.BytesIO(clip.audio))
        body = MultipartBody(fields, sample)
        with upstream_errors(target.channel):
            reply = await self._send(target, "POST", ADD_VOICE_PATH, body, body.content_type)
            created = await self._answer(target, reply)
        voice_id = created.get("voice_id") if isinstance(created, dict) else None
        if not isinstance(voice_id, str) or not voice_id:
            raise UpstreamError(f"The upstream channel `{target.channel}` did not name the voice.")
        return voice_id

    async def delete_voice(self, target: Target, name: str) -> bool:
        with upstream_errors(target.channel):
            reply = await self._send(target, "DELETE", VOICE_PATH + quote(name, safe=""), b"")
            raw = await reply.read(self._bounds.max_reply_bytes)
        if reply.status == 404 or (reply.status < 500 and says_voice_is_gone(raw)):
            return False
        if reply.status >= 300:
            raise elevenlabs_refusal(target, reply.status, raw, reply.headers)
        return True

    # transcription (Scribe)

    async def transcribe(self, target: Target, request: TranscriptionRequest) -> Transcript:
        if request.task == "translate":
            raise scribe.no_translation()
        fields = scribe.form_fields(target.model, request)
        upload = request.upload
        body = MultipartBody(
            fields, FilePart("file", upload.filename, upload.content_type, upload.file)
        )
        with upstream_errors(target.channel):
            reply = await self._send(target, "POST", STT_PATH, body, body.content_type)
            answer = await self._answer(target, reply)
        return scribe.transcript(answer, request, target.channel)

    def transcribe_stream(
        self, target: Target, request: TranscriptionRequest
    ) -> AbstractAsyncContextManager[Batches]:
        return self._whole_as_stream(target, request)

    @asynccontextmanager
    async def _whole_as_stream(
        self, target: Target, request: TranscriptionRequest
    ) -> AsyncIterator[Batches]:
        """Scribe does not stream files: its whole text is one delta, then the done event."""
        whole = await self.transcribe(target, _as_json(request))
        text = str(whole.body.get("text") or "") if isinstance(whole.body, dict) else ""

        async def events() -> Batches:
            yield [{"type": scribe.DELTA, "delta": text}, {"type": scribe.DONE, "text": text}]

        yield events()


def tts_body(model: str, request: SpeechRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "text": request.input,
        "model_id": model,
        "voice_settings": {"speed": within(request.speed, SLOWEST, FASTEST)},
    }
    if request.language is not None and model.endswith(LANGUAGE_MODELS_SUFFIX):
        body["language_code"] = request.language
    return body


def output_format(request: SpeechRequest) -> tuple[str, str, int]:
    """ElevenLabs' ``output_format`` for the request, the format it makes and its rate."""
    if request.response_format == "mp3":
        return MP3_FORMAT, "mp3", 44100
    rate = nearest_rate(PCM_RATES, request.sample_rate)
    return f"pcm_{rate}", "pcm", rate


def sort_voice(voice: Any, builtin: list[str], uploaded: list[str]) -> None:
    """File one listed voice as built-in or uploaded (by its category and name)."""
    if not isinstance(voice, dict) or not isinstance(voice.get("voice_id"), str):
        return
    name = voice.get("name")
    made_here = voice.get("category") in UPLOADED_CATEGORIES
    clone_named = isinstance(name, str) and clone_owner(name) is not None
    (uploaded if made_here or clone_named else builtin).append(voice["voice_id"])


def _as_json(request: TranscriptionRequest) -> TranscriptionRequest:
    return TranscriptionRequest(
        task=request.task,
        upload=request.upload,
        response_format="json",
        options=request.options,
        timestamp_granularities=request.timestamp_granularities,
        include=request.include,
    )
