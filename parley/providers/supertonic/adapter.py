"""``Speech`` and ``Voices`` for Supertone's Supertonic server (channel type ``supertonic``).

Its native ``POST /tts`` is used (not its OpenAI alias): it takes ``steps``, which is how
Parley's ``quality`` reaches it. It makes wav, flac and ogg only, so anything else is asked
for as wav and converted by Parley. Its speeds are 0.7 to 2.0: a speed outside is clamped
to the nearest it can do (a caller's 0.25 to 4.0 stays valid, as the spec says). It does
not stream; the file is relayed as it arrives. Voices are its styles: the ``builtin`` ones
(M1 to M5, F1 to F5) are listed; ``custom`` styles were imported by the operator, not
created through Parley, and are never shown. It cannot clone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import orjson

from parley.domain.wire import JSON
from parley.errors import UpstreamError
from parley.http import Reply
from parley.providers.audio_replies import (
    EngineAdapter,
    handed_over,
    raw_pieces,
    read_answer,
    reply_format,
    within,
)
from parley.providers.base import (
    SPEECH,
    VOICES,
    EngineRoster,
    Serves,
    SpeechAudio,
    SpeechRequest,
    Target,
    VoiceClip,
    VoicesUnsupported,
    upstream_errors,
)

TTS_PATH = "/tts"
STYLES_PATH = "/styles"
NATIVE_FORMATS = frozenset({"wav", "flac", "ogg"})
SLOWEST, FASTEST = 0.7, 2.0
SAMPLE_RATE = 44100


class SupertonicAdapter(EngineAdapter):
    __slots__ = ()
    serves: ClassVar[Serves] = (SPEECH, VOICES)

    @asynccontextmanager
    async def speech(self, target: Target, request: SpeechRequest) -> AsyncIterator[SpeechAudio]:
        asked = request.response_format if request.response_format in NATIVE_FORMATS else "wav"
        reply = await self._synthesis(target, TTS_PATH, orjson.dumps(tts_body(request, asked)))
        fmt = reply_format(reply.content_type, asked)
        audio = SpeechAudio(
            "opus" if fmt == "ogg" else fmt,
            raw_pieces(reply, target.channel),
            sample_rate=_sample_rate(reply),
        )
        async with handed_over(audio, reply) as handed:
            yield handed

    async def list_voices(self, target: Target) -> EngineRoster:
        with upstream_errors(target.channel):
            reply = await self._send(target, "GET", STYLES_PATH, b"")
            listing = await read_answer(reply, target, self._bounds.max_reply_bytes)
        styles = listing.get("styles") if isinstance(listing, dict) else None
        if not isinstance(styles, list):
            raise UpstreamError(
                f"The upstream channel `{target.channel}` sent a style list Parley cannot read."
            )
        return EngineRoster(builtin=tuple(_builtin_names(styles)))

    async def create_voice(self, target: Target, clip: VoiceClip) -> str:
        raise VoicesUnsupported(f"The upstream channel `{target.channel}` cannot clone voices.")

    async def delete_voice(self, target: Target, name: str) -> bool:
        return False  # nothing is ever cloned on it, so nothing of Parley's is there


def tts_body(request: SpeechRequest, response_format: str) -> JSON:
    body: JSON = {
        "text": request.input,
        "speed": within(request.speed, SLOWEST, FASTEST),
        "response_format": response_format,
    }
    if request.voice is not None:
        body["voice"] = request.voice
    if request.steps is not None:
        body["steps"] = request.steps
    if request.language is not None:
        body["lang"] = request.language
    return body


def _builtin_names(styles: list[Any]) -> list[str]:
    return [
        str(style["name"])
        for style in styles
        if isinstance(style, dict)
        and style.get("kind") == "builtin"
        and isinstance(style.get("name"), str)
    ]


def _sample_rate(reply: Reply) -> int:
    try:
        return int(reply.headers.get(b"x-sample-rate", b""))
    except ValueError:
        return SAMPLE_RATE
