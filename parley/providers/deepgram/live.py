"""Streamed transcription over Deepgram's live WebSocket (``wss://…/v1/listen``).

Parley's own HTTP client speaks HTTP/1.1 only, so this one call uses aiohttp's client
WebSocket, in a session of its own per call (a WebSocket is one connection for one call
either way: there is nothing to pool). The channel's ``base_url`` gives the address
(``https`` becomes ``wss``, ``http`` becomes ``ws``), its key goes as
``Authorization: Token``, its connect timeout bounds the handshake, its idle timeout
bounds the silence between two messages, and no message may be larger than the upstream
bounds' ``max_event_bytes``.

The upload is sent as it is, containerized (wav, mp3, ogg, webm, flac...): Deepgram reads
the container, so no ``encoding`` or ``sample_rate`` is sent. It is sent **as fast as
Deepgram takes it**, in 64 KiB binary frames, each written once the socket has taken the
last, not paced at real time: the file exists whole, and pacing it would make the caller
wait its whole length (and hold a connection as long) for the same transcript. Then
``{"type": "CloseStream"}`` asks Deepgram to finish: it sends the last results and closes
the socket normally. Messages are read while the audio is still being sent, so neither
side waits on the other.

``interim_results`` is off: OpenAI's deltas only ever add text, where Deepgram's interim
results are revised later. Each final ``Results`` message's transcript becomes one
``transcript.text.delta`` as it arrives (a space between two of them), and the normal
close after all the audio was sent becomes one ``transcript.text.done`` with the whole
text. ``Metadata``, ``UtteranceEnd`` and ``SpeechStarted`` messages carry no text.

Failures: a refused handshake is the HTTP status it carried (``wire.deepgram_refusal``:
a 401 or 429 is the channel's, with its ``retry-after``); a close with code 1008 (policy:
Deepgram could not decode the audio) is the request's fault, a 400 that relays Deepgram's
reason; any other close before the end, a close before all the audio was sent, an error
message, silence past the idle timeout or a message past the bound is the upstream's
failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
import orjson
from yarl import URL

from parley import upstream_json
from parley.domain.wire import JSON
from parley.errors import UpstreamError, UpstreamRefused, UpstreamUnreachable
from parley.providers.base import (
    Batches,
    ReplyBounds,
    Target,
    TranscriptionRequest,
    upstream_failure,
)
from parley.providers.deepgram.wire import LISTEN_PATH, deepgram_refusal, listen_query
from parley.providers.openai.refusal import rejected, stream_failure
from parley.providers.redaction import redact

PIECE_BYTES = 64 * 1024
CLOSE_STREAM = '{"type": "CloseStream"}'
DELTA = "transcript.text.delta"
DONE = "transcript.text.done"
NORMAL_CLOSE = 1000
POLICY_CLOSE = 1008
TOO_BIG_CLOSE = 1009
WS_SCHEMES = {"https": "wss", "http": "ws"}


def live_url(base_url: str, query: list[tuple[str, str]]) -> URL:
    """The WebSocket address of ``listen`` on the channel's host, with ``query``."""
    url = URL(base_url + LISTEN_PATH)
    return url.with_scheme(WS_SCHEMES[url.scheme]).with_query(query)


@dataclass(slots=True)
class _Sending:
    """How far the upload got: whether every byte and then ``CloseStream`` were sent."""

    all_sent: bool = False


@asynccontextmanager
async def live_transcript(
    target: Target, request: TranscriptionRequest, bounds: ReplyBounds
) -> AsyncIterator[Batches]:
    """OpenAI's transcript events for the upload, as Deepgram's live results arrive;
    entered once the WebSocket is open (a refused handshake raises here)."""
    timeout = aiohttp.ClientTimeout(
        total=None, sock_connect=target.connect_timeout, sock_read=target.read_timeout
    )
    session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False)
    try:
        socket = await _connect(session, target, request, bounds)
        sending = _Sending()
        sender = asyncio.create_task(_send_audio(socket, request, sending))
        events = _events(socket, sending, target)
        try:
            yield events
        finally:
            await events.aclose()
            await _stop(sender)
            await socket.close()
    finally:
        await session.close()


async def _connect(
    session: aiohttp.ClientSession,
    target: Target,
    request: TranscriptionRequest,
    bounds: ReplyBounds,
) -> aiohttp.ClientWebSocketResponse:
    headers = {"Authorization": f"Token {target.api_key}"} if target.api_key else {}
    url = live_url(target.base_url, listen_query(target, request, live=True))
    try:
        async with asyncio.timeout(target.connect_timeout + target.read_timeout):
            return await session.ws_connect(
                url,
                headers=headers,
                max_msg_size=bounds.max_event_bytes,
                autoping=True,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=target.connect_timeout),
            )
    except Exception as error:
        raise _failure(target, error) from None


async def _send_audio(
    socket: aiohttp.ClientWebSocketResponse, request: TranscriptionRequest, sending: _Sending
) -> None:
    """The upload in binary frames, as fast as the socket takes them, then CloseStream."""
    spool = request.upload.file
    spool.seek(0)
    while piece := spool.read(PIECE_BYTES):
        await socket.send_bytes(piece)
    await socket.send_str(CLOSE_STREAM)
    sending.all_sent = True


async def _stop(sender: asyncio.Task[None]) -> None:
    """Stop the sender (done, or cut short with the stream), its failure left unraised:
    what the reader saw of the socket says what went wrong."""
    sender.cancel()
    await asyncio.wait([sender])
    if not sender.cancelled():
        sender.exception()


async def _events(
    socket: aiohttp.ClientWebSocketResponse, sending: _Sending, target: Target
) -> AsyncGenerator[list[JSON], None]:
    said: list[str] = []
    while True:
        try:
            message = await socket.receive(timeout=target.stream_timeout)
        except Exception as error:
            raise _failure(target, error) from None
        kind = message.type
        if kind == aiohttp.WSMsgType.TEXT:
            batch = deltas(message.data, said, target)
            if batch:
                yield batch
        elif kind in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
            code = socket.close_code
            if code == NORMAL_CLOSE and sending.all_sent:
                yield [{"type": DONE, "text": " ".join(said)}]
                return
            reason = message.extra if isinstance(message.extra, str) else ""
            raise _closed(target, code, reason)
        elif kind == aiohttp.WSMsgType.ERROR:
            raise _failure(target, message.data)


def deltas(data: str, said: list[str], target: Target) -> list[JSON]:
    """The delta a final ``Results`` message holds; nothing for any other message."""
    try:
        event = upstream_json.loads(data)
    except orjson.JSONDecodeError:
        event = None
    if not isinstance(event, dict):
        raise UpstreamError(f"The upstream channel `{target.channel}` sent a broken message.")
    kind = event.get("type")
    if kind == "Error" or "err_code" in event or "error" in event:
        raise stream_failure(target.channel, {"error": event}, target.api_key)
    if kind != "Results" or not (event.get("is_final") or event.get("from_finalize")):
        return []
    channel = event.get("channel")
    alternatives = channel.get("alternatives") if isinstance(channel, dict) else None
    first = alternatives[0] if isinstance(alternatives, list) and alternatives else None
    text = first.get("transcript") if isinstance(first, dict) else None
    if not isinstance(text, str) or not text.strip():
        return []
    text = text.strip()
    delta = text if not said else " " + text
    said.append(text)
    return [{"type": DELTA, "delta": delta}]


def _closed(target: Target, code: int | None, reason: str) -> UpstreamError:
    """The error for a socket Deepgram closed before the stream's end."""
    channel = target.channel
    if code == POLICY_CLOSE:
        said = reason or "Deepgram could not process the audio."
        return rejected(400, {"error": {"message": said}}, target.api_key)
    if code == TOO_BIG_CLOSE:
        return _too_large(channel)
    return UpstreamRefused(
        f"The upstream channel `{channel}` closed the stream before its end (close code {code}).",
        upstream_status=502,
        retryable=True,
        detail=redact(reason[:500], target.api_key) if reason else None,
    )


def _too_large(channel: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream channel `{channel}` sent a streamed event larger than Parley accepts."
    )


def _failure(target: Target, error: BaseException) -> UpstreamError:
    """The error tree's name for what aiohttp raised (or reported) on the socket."""
    channel = target.channel
    if isinstance(error, UpstreamError):
        return error
    if isinstance(error, aiohttp.WSServerHandshakeError):
        if error.status < 300:
            return UpstreamError(f"The upstream channel `{channel}` sent a broken reply.")
        return deepgram_refusal(
            channel, error.status, b"", target.api_key, _raw_headers(error.headers)
        )
    if isinstance(error, aiohttp.WebSocketError) and error.code == TOO_BIG_CLOSE:
        return _too_large(channel)
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return UpstreamUnreachable(
            f"The upstream channel `{channel}` is unreachable (no connection in time)."
        )
    if isinstance(error, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return UpstreamUnreachable(f"The upstream channel `{channel}` is unreachable.")
    if isinstance(error, Exception):
        mapped = upstream_failure(channel, error)
        if mapped is not None:
            return mapped
    return UpstreamError(f"The upstream channel `{channel}` failed.")


def _raw_headers(headers: Mapping[str, str] | None) -> dict[bytes, bytes]:
    """aiohttp's headers as the refusal reads them (lower-case bytes)."""
    if headers is None:
        return {}
    return {
        name.lower().encode("latin-1", "replace"): value.encode("latin-1", "replace")
        for name, value in headers.items()
    }
