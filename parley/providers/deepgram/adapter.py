"""``Transcription``, ``Speech`` and ``Voices`` for Deepgram (channel type ``deepgram``).

Every call carries the channel's key as ``Authorization: Token <key>``; the channel's
``base_url`` is Deepgram's ``https://api.deepgram.com/v1`` (or a self-hosted one).

- Files: ``POST /listen`` with the upload as the body, under the media type of the
  container Parley sniffed, streamed from its spool as the socket takes it; the reply is
  shaped as OpenAI's (``wire.transcript``).
- Streams (``stream=true``): the live WebSocket (``live``).
- Translation: Deepgram does not translate speech to English. A translation that reaches
  a Deepgram channel (a model that declares ``translate`` although it is served by one)
  is refused as the caller's 400 ``translation_not_supported``, before any call: it is
  never sent, never fallen over and never counted against the channel's breaker.
- Speech: ``POST /speak`` with ``{"text": ...}`` (``wire.speak_query``); the audio is
  relayed as it arrives, in the format asked (Deepgram makes every one of OpenAI's).
- Voices: Aura's models (``GET /models``, ``wire.roster``). Deepgram cannot clone:
  ``create_voice`` raises ``VoicesUnsupported``, and nothing of Parley's is ever there to
  delete.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import IO

import orjson
from yarl import URL

from parley import upstream_json
from parley.errors import InvalidRequest
from parley.http import HttpClient, Prepared, prepare
from parley.providers.audio_replies import handed_over, raw_pieces
from parley.providers.base import (
    Batches,
    EngineRoster,
    ReplyBounds,
    SpeechAudio,
    SpeechRequest,
    Target,
    Transcript,
    TranscriptionRequest,
    VoiceClip,
    VoicesUnsupported,
    upstream_errors,
)
from parley.providers.deepgram.live import live_transcript
from parley.providers.deepgram.wire import (
    LISTEN_PATH,
    MODELS_PATH,
    SPEAK_PATH,
    Query,
    deepgram_refusal,
    listen_query,
    roster,
    speak_query,
    transcript,
)

PIECE_BYTES = 64 * 1024


class FileBody:
    """The upload as a raw request body of known length, read from its spool in pieces
    as the socket takes them (``HttpClient.send``), from its start on every try."""

    __slots__ = ("_file", "length")

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self.length = file.seek(0, os.SEEK_END)
        file.seek(0)

    def pieces(self) -> Iterator[bytes]:
        self._file.seek(0)
        left = self.length
        while left > 0:
            piece = self._file.read(min(PIECE_BYTES, left))
            if not piece:
                raise ValueError("the file to upload got shorter while it was being sent")
            left -= len(piece)
            yield piece


def refuse_translation(target: Target) -> InvalidRequest:
    return InvalidRequest(
        f"The channel `{target.channel}` is Deepgram, which does not translate speech to "
        "English; use /v1/audio/transcriptions, or a model whose channel translates "
        "(GET /v1/models lists each model's abilities).",
        param="model",
        code="translation_not_supported",
    )


class DeepgramAdapter:
    __slots__ = ("_bounds", "_http")

    def __init__(self, http: HttpClient, bounds: ReplyBounds | None = None) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()

    # speech to text

    async def transcribe(self, target: Target, request: TranscriptionRequest) -> Transcript:
        if request.task == "translate":
            raise refuse_translation(target)
        query = listen_query(target, request, live=False)
        upload = request.upload
        with upstream_errors(target.channel):
            reply = await self._http.send(
                self._request(target, "POST", LISTEN_PATH, query, upload.content_type),
                FileBody(upload.file),
                connect_timeout=target.connect_timeout,
                read_timeout=target.read_timeout,
            )
            raw = await reply.read(self._bounds.max_reply_bytes)
            if reply.status >= 300:
                raise deepgram_refusal(
                    target.channel, reply.status, raw, target.api_key, reply.headers
                )
            return transcript(upstream_json.loads(raw), target, request)

    def transcribe_stream(
        self, target: Target, request: TranscriptionRequest
    ) -> AbstractAsyncContextManager[Batches]:
        if request.task == "translate":
            raise refuse_translation(target)
        return live_transcript(target, request, self._bounds)

    # text to speech

    @asynccontextmanager
    async def speech(self, target: Target, request: SpeechRequest) -> AsyncIterator[SpeechAudio]:
        query, made = speak_query(target, request)
        body = orjson.dumps({"text": request.input})
        with upstream_errors(target.channel):
            reply = await self._http.send(
                self._request(target, "POST", SPEAK_PATH, query, "application/json"),
                body,
                connect_timeout=target.connect_timeout,
                read_timeout=target.stream_timeout,
            )
            if reply.status >= 300:
                raw = await reply.read(self._bounds.max_reply_bytes)
                raise deepgram_refusal(
                    target.channel, reply.status, raw, target.api_key, reply.headers
                )
        audio = SpeechAudio(
            made.format, raw_pieces(reply, target.channel), sample_rate=made.sample_rate
        )
        async with handed_over(audio, reply) as handed:
            yield handed

    # voices

    async def list_voices(self, target: Target) -> EngineRoster:
        with upstream_errors(target.channel):
            reply = await self._http.send(
                self._request(target, "GET", MODELS_PATH, [], None),
                b"",
                connect_timeout=target.connect_timeout,
                read_timeout=target.read_timeout,
            )
            raw = await reply.read(self._bounds.max_reply_bytes)
            if reply.status >= 300:
                raise deepgram_refusal(
                    target.channel, reply.status, raw, target.api_key, reply.headers
                )
            return roster(upstream_json.loads(raw), target.channel)

    async def create_voice(self, target: Target, clip: VoiceClip) -> str:
        raise VoicesUnsupported(
            f"The upstream channel `{target.channel}` is Deepgram, which cannot clone voices."
        )

    async def delete_voice(self, target: Target, name: str) -> bool:
        return False  # nothing is ever cloned on it, so nothing of Parley's is there

    def _request(
        self, target: Target, method: str, path: str, query: Query, content_type: str | None
    ) -> Prepared:
        url = URL(target.base_url + path).with_query(query)
        headers = {"Accept": "application/json" if path != SPEAK_PATH else "*/*"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        if target.api_key:
            headers["Authorization"] = f"Token {target.api_key}"
        return prepare(method, str(url), headers, encoded=True)
