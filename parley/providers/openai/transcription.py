"""Speech-to-text over OpenAI's audio wire format, as OpenAI, speaches and vLLM speak it.

The upload is streamed to the engine from the caller's spooled file (``http.multipart``).
Replies come back in OpenAI's shapes whatever the engine sent (``domain.transcripts``):

- an engine that cannot write subtitles (vLLM) is asked for ``verbose_json`` and the SRT
  or WebVTT is written from its segments; one that answers ``text`` as JSON (vLLM) is
  asked for ``json`` and its text returned as text;
- a stream is OpenAI's ``transcript.text.delta`` events and one ``transcript.text.done``,
  whether the engine sent those (OpenAI, speaches: no ``[DONE]``), chat-completion-shaped
  chunks (vLLM: ``choices[].delta.content``, then ``[DONE]``), or a whole reply.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ClassVar

import orjson

from parley import upstream_json
from parley.domain.transcripts import ResponseFormat, engine_seconds, subtitles, verbose
from parley.domain.wire import JSON
from parley.errors import UpstreamError
from parley.http import HttpClient, Reply, prepare
from parley.http.multipart import FilePart, MultipartBody
from parley.providers.base import (
    TRANSCRIPTION,
    Batches,
    ReplyBounds,
    Serves,
    Target,
    Transcript,
    TranscriptionRequest,
    upstream_errors,
)
from parley.providers.openai.refusal import refusal, stream_failure
from parley.sse import EventTooLarge, SseParser

PATHS = {"transcribe": "/audio/transcriptions", "translate": "/audio/translations"}
DELTA = "transcript.text.delta"
DONE = "transcript.text.done"
_END = "[DONE]"


class TranscriptionAdapter:
    """``Transcription`` for one dialect: ``writes_subtitles=False`` for engines that refuse
    srt/vtt and answer ``text`` as JSON (vLLM). Replies and events are accepted within
    ``bounds``."""

    __slots__ = ("_bounds", "_http", "_writes_subtitles")
    serves: ClassVar[Serves] = (TRANSCRIPTION,)

    def __init__(
        self, http: HttpClient, bounds: ReplyBounds | None = None, *, writes_subtitles: bool = True
    ) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._writes_subtitles = writes_subtitles

    def engine_format(self, asked: ResponseFormat) -> ResponseFormat:
        """What to ask the engine for so the caller's format can be given."""
        if self._writes_subtitles:
            return asked
        if asked in ("srt", "vtt"):
            return "verbose_json"
        return "json" if asked == "text" else asked

    async def transcribe(self, target: Target, request: TranscriptionRequest) -> Transcript:
        with upstream_errors(target.channel):
            response = await self._post(target, request, stream=False)
            raw = await response.read(self._bounds.max_reply_bytes)
            if response.status >= 300:
                status = _judged_status(response.status)
                raise refusal(target.channel, status, raw, target.api_key, response.headers)
            return shape(request, response.content_type, raw, target.channel)

    def transcribe_stream(
        self, target: Target, request: TranscriptionRequest
    ) -> AbstractAsyncContextManager[Batches]:
        return self._stream(target, request)

    @asynccontextmanager
    async def _stream(
        self, target: Target, request: TranscriptionRequest
    ) -> AsyncIterator[Batches]:
        with upstream_errors(target.channel):
            response = await self._post(target, request, stream=True)
            if response.status >= 300:
                raw = await response.read(self._bounds.max_reply_bytes)
                status = _judged_status(response.status)
                raise refusal(target.channel, status, raw, target.api_key, response.headers)
        events = _events(response, target, self._bounds)
        try:
            yield events
        finally:
            await events.aclose()
            response.release()

    async def _post(self, target: Target, request: TranscriptionRequest, *, stream: bool) -> Reply:
        fmt = "json" if stream else self.engine_format(request.response_format)
        fields = [("model", target.model), ("response_format", fmt), *request.options]
        fields += [("timestamp_granularities[]", g) for g in request.timestamp_granularities]
        fields += [("include[]", item) for item in request.include]
        if stream:
            fields.append(("stream", "true"))
        upload = request.upload
        body = MultipartBody(
            fields, FilePart("file", upload.filename, upload.content_type, upload.file)
        )
        headers = {"Content-Type": body.content_type, "Accept": "application/json, text/plain"}
        if stream:
            headers["Accept"] = "text/event-stream"
        if target.api_key:
            headers["Authorization"] = f"Bearer {target.api_key}"
        return await self._http.send(  # a stream's reads may each take the idle timeout
            prepare("POST", f"{target.base_url}{PATHS[request.task]}", headers),
            body,
            connect_timeout=target.connect_timeout,
            read_timeout=target.stream_timeout if stream else target.read_timeout,
        )


def _judged_status(status: int) -> int:
    """The status to judge a refusal by: speaches' 415 (undecodable audio) is the
    request's fault, like a 400."""
    return 400 if status == 415 else status


def shape(request: TranscriptionRequest, content_type: str, raw: bytes, channel: str) -> Transcript:
    """The engine's whole reply in OpenAI's shape for the caller's format."""
    fmt = request.response_format
    if content_type.endswith("json") or raw.lstrip().startswith(b"{"):
        body = _object(raw, channel)
        seconds = engine_seconds(body)
        if fmt == "json":
            return Transcript(_json_reply(body), seconds)
        if fmt == "text":
            return Transcript(_text_line(str(body.get("text") or "")), seconds)
        shaped = verbose(body, request.task)
        if fmt == "verbose_json":
            return Transcript(shaped, seconds)
        if "segments" not in shaped:
            raise UpstreamError(f"The upstream channel `{channel}` sent no segments for {fmt}.")
        return Transcript(subtitles(shaped["segments"], fmt), seconds)
    text = raw.decode("utf-8", errors="replace")
    if fmt == "json":
        return Transcript({"text": text.strip()})
    if fmt == "verbose_json":
        raise UpstreamError(f"The upstream channel `{channel}` sent text for verbose_json.")
    return Transcript(_text_line(text) if fmt == "text" else text)


def _json_reply(body: JSON) -> JSON:
    reply: JSON = {"text": str(body.get("text") or "")}
    for extra in ("logprobs", "languages"):
        if isinstance(body.get(extra), list):
            reply[extra] = body[extra]
    return reply


def _text_line(text: str) -> str:
    """The ``text`` format as OpenAI writes it: the transcript and one line break."""
    return text.strip() + "\n"


def _object(raw: bytes, channel: str) -> JSON:
    try:
        body = upstream_json.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise UpstreamError(
            f"The upstream channel `{channel}` sent a reply that is not valid JSON."
        )
    return body


async def _events(
    response: Reply, target: Target, bounds: ReplyBounds
) -> AsyncGenerator[list[JSON], None]:
    """OpenAI's transcript events from whatever the engine streams, batch by batch."""
    channel = target.channel
    if response.content_type != "text/event-stream":
        with upstream_errors(channel):
            raw = await response.read(bounds.max_reply_bytes)
            text = str(_object(raw, channel).get("text") or "")
        yield [{"type": DELTA, "delta": text}, {"type": DONE, "text": text}]
        return
    reshaper = Reshaper(channel, target.api_key)
    parser = SseParser(bounds.max_event_bytes)
    with upstream_errors(channel):
        async for data in response.pieces():
            try:
                events, too_large = parser.feed(data), None
            except EventTooLarge as error:
                events, too_large = error.events, error
            batch = reshaper.feed(event.data for event in events)
            if batch:
                yield batch
            if reshaper.failure is not None:
                raise reshaper.failure
            if reshaper.finished:
                return
            if too_large is not None:
                raise too_large
    raise UpstreamError(f"The upstream channel `{channel}` ended the stream before its end.")


class Reshaper:
    """Turns engine stream payloads into OpenAI's transcript events. What a read delivered
    before an error payload is returned first; the error waits in ``failure``."""

    __slots__ = ("_channel", "_secret", "failure", "finished", "said")

    def __init__(self, channel: str, secret: str | None) -> None:
        self._channel = channel
        self._secret = secret
        self.said: list[str] = []
        self.finished = False
        self.failure: UpstreamError | None = None

    def feed(self, payloads: Iterable[str]) -> list[JSON]:
        batch: list[JSON] = []
        for payload in payloads:
            if self.finished or self.failure is not None:
                break
            if payload == _END:
                batch.append({"type": DONE, "text": "".join(self.said).strip()})
                self.finished = True
            elif payload and not payload.isspace():
                try:
                    batch.extend(self._convert(_object(payload.encode(), self._channel)))
                except UpstreamError as error:
                    self.failure = error
        return batch

    def _convert(self, chunk: JSON) -> list[JSON]:
        if "error" in chunk or "detail" in chunk:
            raise stream_failure(self._channel, _error_envelope(chunk), self._secret)
        kind = chunk.get("type")
        if kind == DELTA:
            return self._delta(chunk.get("delta"), chunk.get("logprobs"))
        if kind == DONE:
            self.finished = True
            text = chunk.get("text")
            done: JSON = {
                "type": DONE,
                "text": text if isinstance(text, str) else "".join(self.said).strip(),
            }
            if isinstance(chunk.get("logprobs"), list):
                done["logprobs"] = chunk["logprobs"]
            return [done]
        choices = chunk.get("choices")
        events: list[JSON] = []
        if isinstance(choices, list):
            for choice in choices:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if isinstance(delta, dict):
                    events += self._delta(delta.get("content"), None)
        return events

    def _delta(self, text: Any, logprobs: Any) -> list[JSON]:
        if not isinstance(text, str) or not text:
            return []
        self.said.append(text)
        event: JSON = {"type": DELTA, "delta": text}
        if isinstance(logprobs, list):
            event["logprobs"] = logprobs
        return [event]


def _error_envelope(chunk: JSON) -> JSON:
    """An OpenAI error envelope for an engine's error payload (speaches: ``detail``)."""
    if "error" in chunk:
        return chunk
    return {"error": {"message": str(chunk.get("detail")), "code": None}}
