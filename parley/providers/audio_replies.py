"""What speech engines' adapters share: calling the engine (``EngineAdapter``), media
types, error bodies, reading audio as it arrives.

``EngineAdapter`` holds the HTTP client and the reply bounds, sends a request to the
engine (``_send``: JSON unless told otherwise, the channel's key as a Bearer token, the
channel's timeouts) and starts a synthesis (``_synthesis``: an error answer raised as the
refusal it means, before any audio is handed over).

Engines answer errors in three shapes: OpenAI's ``{"error": {...}}``, FastAPI's
``{"detail": "..."}`` (older vLLM-Omni routes, Kokoro-FastAPI, where ``detail`` may also
be an object with a ``message``) and FastAPI's validation ``{"detail": [{"loc", "msg"}]}``
(Supertonic's 422). All become the one ``UpstreamRefused`` of ``openai.refusal``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import orjson

from parley import upstream_json
from parley.errors import InvalidRequest, UpstreamRefused
from parley.http import HttpClient, Reply, prepare
from parley.http.client import StreamedBody
from parley.providers.base import ReplyBounds, SpeechAudio, Target, upstream_errors
from parley.providers.openai.refusal import refusal

FORMAT_OF_MEDIA_TYPE = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/pcm": "pcm",
    "audio/l16": "pcm",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/flac": "flac",
    "audio/x-flac": "flac",
    "audio/ogg": "opus",
    "audio/opus": "opus",
    "audio/aac": "aac",
}


def within(value: float, lowest: float, highest: float) -> float:
    """``value`` brought into an engine's range (a speed it can do)."""
    return min(highest, max(lowest, value))


def nearest_rate(offered: tuple[int, ...], asked: int | None) -> int:
    """The sample rate of ``offered`` nearest the one asked (24 kHz when none is), the
    higher of two as near."""
    wanted = asked or 24000
    return min(offered, key=lambda rate: (abs(rate - wanted), -rate))


class EngineAdapter:
    __slots__ = ("_bounds", "_http")

    def __init__(self, http: HttpClient, bounds: ReplyBounds | None = None) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()

    async def _send(
        self,
        target: Target,
        method: str,
        path: str,
        body: bytes | StreamedBody,
        content_type: str = "application/json",
        *,
        stream: bool = False,
    ) -> Reply:
        """Send a request with the engine's credential headers (``_credentials``). A
        synthesis's reads (``stream``) may each take the channel's idle timeout, as any
        stream's; anything else's, its read timeout."""
        headers = {"Content-Type": content_type, "Accept": "*/*", **self._credentials(target)}
        return await self._http.send(
            prepare(method, target.base_url + path, headers),
            body,
            connect_timeout=target.connect_timeout,
            read_timeout=target.stream_timeout if stream else target.read_timeout,
        )

    def _credentials(self, target: Target) -> dict[str, str]:
        """The headers that carry the channel's key: OpenAI's ``Authorization: Bearer``,
        which a provider with its own scheme replaces."""
        return {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}

    async def _synthesis(self, target: Target, path: str, body: bytes) -> Reply:
        """The engine's reply to a synthesis ``POST``ed to ``path``, once it said yes."""
        with upstream_errors(target.channel):
            reply = await self._send(target, "POST", path, body, stream=True)
            if reply.status >= 300:
                raise engine_refusal(
                    target.channel,
                    reply.status,
                    await reply.read(self._bounds.max_reply_bytes),
                    target.api_key,
                    reply.headers,
                )
        return reply


def reply_format(content_type: str, asked: str) -> str:
    """The audio format a reply holds, by its Content-Type; what was asked when it is
    generic (``application/octet-stream``, or none)."""
    return FORMAT_OF_MEDIA_TYPE.get(content_type, asked)


def engine_refusal(
    channel: str,
    status: int,
    raw: bytes,
    secret: str | None,
    headers: Mapping[bytes, bytes] | None = None,
) -> UpstreamRefused:
    """The error for an engine's error answer, whatever its body's shape; ``secret`` (the
    channel's key) is never relayed, and a 429 or 5xx keeps the ``retry-after`` of
    ``headers`` (the breaker's cool-down)."""
    return refusal(channel, status, _as_envelope(raw), secret, headers)


async def read_answer(reply: Reply, target: Target, limit: int) -> Any:
    """An engine's whole JSON answer (at most ``limit`` bytes); an error answer is raised
    as the refusal it means."""
    raw = await reply.read(limit)
    if reply.status >= 300:
        raise engine_refusal(target.channel, reply.status, raw, target.api_key, reply.headers)
    return upstream_json.loads(raw)


@asynccontextmanager
async def handed_over(audio: SpeechAudio, reply: Reply) -> AsyncIterator[SpeechAudio]:
    """Hand a synthesis to the caller; afterwards stop reading it and release the reply
    (closed unless it was read to its end)."""
    try:
        yield audio
    finally:
        await audio.pieces.aclose()
        reply.release()


def _as_envelope(raw: bytes) -> bytes:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    if not isinstance(body, dict) or "detail" not in body or "error" in body:
        return raw
    message = _detail_message(body["detail"])
    return orjson.dumps({"error": {"message": message}}) if message else raw


def _detail_message(detail: Any) -> str | None:
    if isinstance(detail, str):
        return detail
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        return str(detail["message"])
    if isinstance(detail, list):
        parts = [_validation_problem(item) for item in detail if isinstance(item, dict)]
        return "; ".join(part for part in parts if part) or None
    return None


def _validation_problem(item: dict[str, Any]) -> str:
    location = item.get("loc")
    where = location[-1] if isinstance(location, list) and location else None
    message = item.get("msg")
    if not isinstance(message, str):
        return ""
    return f"{where}: {message}" if where is not None else message


async def raw_pieces(reply: Reply, channel: str) -> AsyncGenerator[bytes, None]:
    """The reply's body as it arrives; the connection is released at the end."""
    try:
        with upstream_errors(channel):
            async for piece in reply.pieces():
                yield piece
    finally:
        reply.release()


def no_voice() -> InvalidRequest:
    """The refusal of a call that names no voice it can use, on a model without
    ``default_voice``, to an engine without a default voice whose roster offers none
    either (ElevenLabs, Cartesia)."""
    return InvalidRequest(
        "This speech model has no default voice, and the call names none it can use: "
        "name a voice from GET /v1/audio/voices.",
        param="voice",
    )
