"""A realtime voice built from parts: Parley speaks OpenAI's Realtime protocol itself
over a ``kind: realtime`` model's ``cascade`` (docs/realtime.md, "Cascade").

The caller's PCM16 (24 kHz) is held in the input buffer and, while ``turn_detection`` is
on, watched by an energy voice detector (``audio.vad``): speech starting is told
(``input_audio_buffer.speech_started``), and cancels a response being spoken (barge-in:
the answer is cut where its audio stopped and its item truncated to what was spoken);
speech stopping commits the buffer as a user item. Each committed turn is transcribed by
the transcription model; then the chat model answers the conversation, streamed, its
text told as it comes and cut into sentences (``domain.sentences``), each spoken by the
speech model while the next is written, its audio resampled to 24 kHz
(``audio.resample``). Tool calls come back as ``function_call`` items; the caller's
``function_call_output`` and its next ``response.create`` continue the round trip.

Every part is one call of its own model through the runner (``part_reply``,
``part_stream``): resolved for the caller's key (a model it may not use is refused),
admitted against the group's and key's limits and budget at that model's price, routed
over the model's channels with failover, and metered once, endpoint ``/v1/realtime``,
its request id beginning with the session's id (``rtsess_…_<n>``). A refused part is an
``error`` event and a failed response; the session goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from parley.api.cascade_answer import BYTES_PER_MS, Answer, Reply, Spoken
from parley.api.chat import ChatStream
from parley.api.chat_request import parse_chat
from parley.api.speech import SpeechJob
from parley.api.transcription_form import SpeechToText
from parley.api.transcriptions import WholeTranscription
from parley.audio.info import AudioInfo
from parley.audio.sniff import Container
from parley.audio.vad import VoiceDetector
from parley.audio.wav import wav_header
from parley.dialects.realtime import BadEvent, ClientEvent, error_event, read_client_event
from parley.dialects.realtime_fields import (
    RATE,
    SERVER_VAD,
    check_formats,
    item_text,
    read_audio,
    read_item,
    read_limit,
    read_modalities,
    read_object,
    read_string,
    read_tools,
    read_turn_detection,
)
from parley.domain.models import CHAT_KINDS, Cascade, Resolved
from parley.domain.realtime_sessions import PREFIX as SESSION_PREFIX
from parley.errors import INTERNAL_ERROR_MESSAGE, ParleyError
from parley.pipeline import runner
from parley.pipeline.admit import scopes_for
from parley.pipeline.authenticate import Caller
from parley.pipeline.context import CALLER, SERVICES
from parley.pipeline.job import Operation
from parley.pipeline.meter import Refusal
from parley.pipeline.realtime_life import (
    ENDPOINT,
    GOING_AWAY,
    IDLE,
    NORMAL,
    POLICY,
    RESTARTING,
    SESSION_OVER,
    SHUTTING_DOWN,
    TOO_BIG,
    TOO_LARGE,
    TOO_SLOW,
    UPSTREAM_FAILED,
    Ending,
    close_caller,
    live_session,
    rate_limits,
)
from parley.pipeline.services import Services
from parley.pipeline.started import note_started
from parley.providers.base import AudioUpload, TranscriptionRequest
from parley.runtime.live_sessions import LiveSession
from parley.settings import RealtimeSettings

log = logging.getLogger("parley.realtime")

MIN_COMMIT_MS = 100
"""The least audio a commit takes (OpenAI's own bound)."""
KEEP_MS = 100
"""Between turns the buffer keeps the prefix padding and this much more (the detector
reports a start some frames after the first voiced one)."""
PCM = {"type": "audio/pcm", "rate": RATE}
MODALITIES = (["audio"], ["text"])
TRANSCRIPTION_KINDS = frozenset({"transcription"})
SPEECH_KINDS = frozenset({"speech"})
CHAT_PART = Operation("realtime chat", ENDPOINT, CHAT_KINDS)
SPEECH_PART = Operation("realtime speech", ENDPOINT, SPEECH_KINDS)
TRANSCRIPTION_PART = Operation("realtime transcription", ENDPOINT, TRANSCRIPTION_KINDS)


async def serve_cascade(
    request: web.Request,
    model: Resolved,
    socket: web.WebSocketResponse,
    abort: Callable[[], None],
    bound: dict[str, Any] | None,
) -> web.WebSocketResponse:
    """Upgrade the caller's socket and speak a cascade session on it until it ends;
    counted among the live sessions and ended at shutdown as a relayed one is."""
    svc = request.app[SERVICES]
    note_started(request, socket)
    await socket.prepare(request)
    task = svc.in_flight.current()
    svc.in_flight.add(task)
    caller = request[CALLER]
    try:
        with live_session(svc.live_sessions, caller, model.spec.name, "cascade") as live:
            session = CascadeSession(
                svc, caller, live, model=model, socket=socket, abort=abort, bound=bound
            )
            await session.run(task)
    except Exception:  # the session's own boundary: the socket is a WebSocket now
        log.exception("a realtime cascade session failed")
        with contextlib.suppress(Exception):
            await socket.close(code=UPSTREAM_FAILED, message=b"internal error")
    finally:
        svc.in_flight.discard(task)
    return socket


class _Chat(ChatStream):
    """The chat part: a streamed chat completion, recorded as the session's."""

    __slots__ = ()
    operation = CHAT_PART


class _Speech(SpeechJob):
    """The speech part: one sentence spoken as raw PCM, recorded as the session's."""

    operation = SPEECH_PART


class _Transcription(WholeTranscription):
    """The transcription part: one committed turn, recorded as the session's."""

    operation = TRANSCRIPTION_PART


class CascadeSession:
    """One realtime session Parley speaks itself (see the module's docstring)."""

    def __init__(
        self,
        svc: Services,
        caller: Caller,
        live: LiveSession,
        *,
        model: Resolved,
        socket: web.WebSocketResponse,
        abort: Callable[[], None],
        bound: dict[str, Any] | None = None,
    ) -> None:
        assert model.spec.cascade is not None
        self._live = live
        self._svc = svc
        self._caller = caller
        self._model = model
        self._parts: Cascade = model.spec.cascade
        self._socket = socket
        self._abort = abort
        self._bound = bound
        self._settings: RealtimeSettings = svc.settings.realtime
        self.id = live.id
        self._tag = live.id.removeprefix(SESSION_PREFIX)[:10]
        """What begins the ids of the session's items and responses."""
        self._ids = itertools.count(1)
        self._sending = asyncio.Lock()
        self._closing = False
        self._config = self._initial_config()
        self._buffer = bytearray()
        self._buffer_at = 0
        """Where the input buffer starts, in bytes of all the audio appended."""
        self._detector: VoiceDetector | None = self._new_detector()
        self._speech_item: str | None = None
        """The item a turn in progress will be committed as (after ``speech_started``)."""
        self.items: list[dict[str, Any]] = []
        self.spoken: dict[str, Spoken] = {}
        self._hearing: dict[str, asyncio.Task[None]] = {}
        self._reply: Reply | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._failure: asyncio.Future[Ending] | None = None
        """Set when a response's or transcription's send finds the caller gone or too
        slow: the session ends with it."""

    # The session's life

    async def run(self, task: asyncio.Task[Any]) -> None:
        """Speak until the caller leaves, the session's time is up, or shutdown; every
        part begun is metered before this returns."""
        self._failure = asyncio.get_running_loop().create_future()
        pump = asyncio.create_task(self._from_caller(), name="parley-cascade-caller")
        ending: Ending | None = None
        try:
            async with asyncio.timeout(self._settings.max_session_seconds):
                await asyncio.wait((pump, self._failure), return_when=asyncio.FIRST_COMPLETED)
            if self._failure.done():
                ending = self._failure.result()
            else:
                ended = pump.exception()
                if isinstance(ended, Ending):
                    ending = ended
                elif ended is not None:
                    raise ended
        except TimeoutError:
            seconds = f"{self._settings.max_session_seconds:g}"
            ending = Ending(GOING_AWAY, SESSION_OVER.format(seconds))
        except asyncio.CancelledError:
            if not self._svc.in_flight.ending(task):
                await self._stop(pump)
                raise
            task.uncancel()
            said = self._error(SHUTTING_DOWN, "service_unavailable", kind="server_error")
            ending = Ending(RESTARTING, SHUTTING_DOWN, said)
        await self._stop(pump)  # every part metered before the caller hears the end
        if ending is not None:
            await self._close(ending)

    async def _stop(self, pump: asyncio.Task[None]) -> None:
        """Stop reading the caller, cancel what is running (each part records itself) and
        wait for it; nothing more is sent but the close."""
        self._closing = True
        tasks = [pump, *self._tasks]
        for running in tasks:
            running.cancel()
        for running in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running

    async def _from_caller(self) -> None:
        socket, idle = self._socket, self._settings.idle_seconds
        await self.send_event({"type": "session.created", "session": self._session()})
        if self._bound is not None:
            bound = orjson.dumps({"type": "session.update", "session": self._bound})
            await self._client_event(bound)
        while True:
            try:
                message = await socket.receive(timeout=idle)
            except TimeoutError:
                said = IDLE.format(f"{idle:g}")
                raise Ending(NORMAL, said, self._error(said, "session_idle")) from None
            if message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                await self._client_event(message.data)
            elif message.type == aiohttp.WSMsgType.ERROR:
                raise Ending(TOO_BIG, TOO_LARGE.format(self._settings.max_event_bytes))
            else:  # the caller closed
                return

    async def _client_event(self, frame: str | bytes) -> None:
        try:
            event = read_client_event(frame, self._settings.max_audio_chunk_bytes)
            await self._handle(event)
        except BadEvent as bad:
            await self._send(
                self._error(bad.message, bad.code, param=bad.param, event_id=bad.event_id)
            )

    async def _handle(self, event: ClientEvent) -> None:
        kind, body, event_id = event.type, event.body, event.event_id
        if kind == "session.update":
            self._update(body["session"], event_id)
            await self.send_event({"type": "session.updated", "session": self._session()})
        elif kind == "input_audio_buffer.append":
            await self._append(read_audio(body["audio"], event_id), event_id)
        elif kind == "input_audio_buffer.commit":
            await self._commit(event_id, manual=True)
        elif kind == "input_audio_buffer.clear":
            self._clear()
            await self.send_event({"type": "input_audio_buffer.cleared"})
        elif kind == "output_audio_buffer.clear":
            await self.send_event({"type": "output_audio_buffer.cleared"})
        elif kind == "conversation.item.create":
            await self._create_item(body, event_id)
        elif kind == "conversation.item.retrieve":
            item = self._item(body.get("item_id"), event_id)
            await self.send_event({"type": "conversation.item.retrieved", "item": item})
        elif kind == "conversation.item.delete":
            item = self._item(body.get("item_id"), event_id)
            self.items.remove(item)
            self.spoken.pop(item["id"], None)
            await self.send_event({"type": "conversation.item.deleted", "item_id": item["id"]})
        elif kind == "conversation.item.truncate":
            await self._truncate_asked(body, event_id)
        elif kind == "response.create":
            await self._response_create(body.get("response") or {}, event_id)
        elif kind == "response.cancel":
            reply = self._reply
            if reply is None or reply.task is None:
                raise BadEvent(
                    "There is no active response to cancel.",
                    code="response_cancel_not_active",
                    event_id=event_id,
                )
            await self._cancel(reply, "client_cancelled")

    # The session's configuration

    def _initial_config(self) -> dict[str, Any]:
        return {
            "instructions": "",
            "output_modalities": ["audio"],
            "turn_detection": dict(SERVER_VAD),
            "transcription": {"model": self._parts.transcription},
            "voice": self._parts.voice,
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": "inf",
        }

    def _session(self) -> dict[str, Any]:
        """The session object of ``session.created`` and ``session.updated``."""
        config = self._config
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self._model.spec.name,
            "output_modalities": config["output_modalities"],
            "instructions": config["instructions"],
            "tools": config["tools"],
            "tool_choice": config["tool_choice"],
            "max_output_tokens": config["max_output_tokens"],
            "audio": {
                "input": {
                    "format": dict(PCM),
                    "transcription": config["transcription"],
                    "turn_detection": config["turn_detection"],
                    "noise_reduction": None,
                },
                "output": {"format": dict(PCM), "voice": config["voice"], "speed": 1.0},
            },
        }

    def _update(self, session: dict[str, Any], event_id: str | None) -> None:
        """Apply a ``session.update`` (GA shape, or the beta's flat fields): checked
        whole before anything changes."""
        config = dict(self._config)
        audio = read_object(session.get("audio"), "session.audio", event_id)
        given_in = read_object(audio.get("input"), "session.audio.input", event_id)
        given_out = read_object(audio.get("output"), "session.audio.output", event_id)
        check_formats(session, given_in, given_out, event_id)
        if "instructions" in session:
            config["instructions"] = read_string(session["instructions"], "instructions", event_id)
        modalities = session.get("output_modalities", session.get("modalities"))
        if modalities is not None:
            config["output_modalities"] = read_modalities(modalities, event_id)
        detection = given_in.get("turn_detection", session.get("turn_detection", ...))
        if detection is not ...:
            config["turn_detection"] = read_turn_detection(detection, event_id)
        transcription = given_in.get("transcription", session.get("input_audio_transcription"))
        if isinstance(transcription, dict):  # the cascade's own model hears; hints kept
            hints = {k: v for k, v in transcription.items() if k in ("language", "prompt")}
            config["transcription"] = {"model": self._parts.transcription, **hints}
        voice = given_out.get("voice", session.get("voice"))
        if voice is not None:
            if isinstance(voice, dict):
                voice = voice.get("id")
            config["voice"] = read_string(voice, "session.audio.output.voice", event_id)
        if "tools" in session:
            config["tools"] = read_tools(session["tools"], event_id)
        if "tool_choice" in session:
            config["tool_choice"] = session["tool_choice"]
        limit = session.get("max_output_tokens", session.get("max_response_output_tokens"))
        if limit is not None:
            config["max_output_tokens"] = read_limit(limit, event_id)
        restart = config["turn_detection"] != self._config["turn_detection"]
        self._config = config
        if restart:
            self._detector = self._new_detector()
            self._speech_item = None

    def _new_detector(self) -> VoiceDetector | None:
        detection = self._config["turn_detection"]
        if detection is None:
            return None
        detector = VoiceDetector(
            threshold=detection["threshold"],
            prefix_padding_ms=detection["prefix_padding_ms"],
            silence_duration_ms=detection["silence_duration_ms"],
            rate=RATE,
        )
        detector.skip(self._buffer_at + len(self._buffer))
        return detector

    # The input

    async def _append(self, pcm: bytes, event_id: str | None) -> None:
        """Audio from the caller: held, and watched for turns when detection is on. The
        buffer never holds more than ``server.max_audio_bytes``: a turn that long is
        committed as it is (detection on), or the audio is refused (off)."""
        detector = self._detector
        if len(self._buffer) + len(pcm) > self._svc.settings.server.max_audio_bytes:
            if detector is None:
                raise BadEvent(
                    "The input audio buffer is full: commit or clear it.",
                    code="input_audio_buffer_too_large",
                    event_id=event_id,
                )
            if detector.speaking:
                await self._stopped(detector.heard_ms)
            detector.reset()
        self._buffer += pcm
        if detector is None:
            return
        for speech in detector.feed(pcm):
            if speech.started:
                await self._started(speech.at_ms)
            else:
                await self._stopped(speech.at_ms)
        if not detector.speaking:  # only what a turn's prefix may need is kept
            keep = (self._config["turn_detection"]["prefix_padding_ms"] + KEEP_MS) * BYTES_PER_MS
            self._drop(len(self._buffer) - keep)

    async def _started(self, at_ms: int) -> None:
        self._speech_item = self.new_id("item")
        await self.send_event(
            {
                "type": "input_audio_buffer.speech_started",
                "audio_start_ms": at_ms,
                "item_id": self._speech_item,
            }
        )
        self._drop(at_ms * BYTES_PER_MS - self._buffer_at)  # the turn begins there
        reply = self._reply
        if reply is not None and self._config["turn_detection"]["interrupt_response"]:
            await self._cancel(reply, "turn_detected")

    async def _stopped(self, at_ms: int) -> None:
        await self.send_event(
            {
                "type": "input_audio_buffer.speech_stopped",
                "audio_end_ms": at_ms,
                "item_id": self._speech_item,
            }
        )
        await self._commit(None, manual=False)

    def _drop(self, size: int) -> None:
        """Forget the first ``size`` bytes of the buffer (whole samples)."""
        size = min(max(0, size - size % 2), len(self._buffer))
        del self._buffer[:size]
        self._buffer_at += size

    def _clear(self) -> None:
        self._drop(len(self._buffer))
        self._speech_item = None
        if self._detector is not None:
            self._detector.reset()

    async def _commit(self, event_id: str | None, *, manual: bool) -> None:
        """The buffer becomes a user item, transcribed; with ``create_response``, the turn
        (committed by the detector) is answered once heard."""
        if len(self._buffer) < MIN_COMMIT_MS * BYTES_PER_MS:
            if not manual:
                self._clear()
                return
            raise BadEvent(
                f"The input audio buffer holds less than {MIN_COMMIT_MS} ms of audio.",
                code="input_audio_buffer_commit_empty",
                event_id=event_id,
            )
        pcm = bytes(self._buffer)
        item_id = self._speech_item or self.new_id("item")
        self._clear()
        previous = self.items[-1]["id"] if self.items else None
        item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        self.items.append(item)
        await self.send_event(
            {
                "type": "input_audio_buffer.committed",
                "previous_item_id": previous,
                "item_id": item_id,
            }
        )
        await self.send_event(
            {"type": "conversation.item.added", "previous_item_id": previous, "item": item}
        )
        detection = self._config["turn_detection"]
        answer = not manual and detection is not None and detection.get("create_response", True)
        self._hear(item, pcm, answer=answer)

    def _hear(self, item: dict[str, Any], pcm: bytes, *, answer: bool) -> None:
        hearing = self.spawn(self._transcribe(item, pcm, answer=answer))
        self._hearing[item["id"]] = hearing
        hearing.add_done_callback(lambda _: self._hearing.pop(item["id"], None))

    async def _transcribe(self, item: dict[str, Any], pcm: bytes, *, answer: bool) -> None:
        """One transcription part: the item's transcript, told when it is known."""
        item_id = item["id"]
        hints = self._config["transcription"]
        options = tuple(
            (name, str(hints[name])) for name in ("language", "prompt") if name in hints
        )
        upload = AudioUpload(
            io.BytesIO(wav_header(RATE, data_size=len(pcm)) + pcm), "audio.wav", "audio/wav"
        )
        seconds = len(pcm) / (RATE * 2)
        asked = SpeechToText(
            self._parts.transcription,
            False,
            TranscriptionRequest("transcribe", upload, "json", options),
            AudioInfo(Container.WAV, "pcm_s16le", RATE, 1, seconds),
        )
        job = _Transcription(asked, self._svc.providers)
        request_id = self._request_id()
        try:
            self._key_in_force()
            reply = await runner.part_reply(self._svc, self._caller, job, request_id)
            text = _transcript(reply)
        except runner.NotAdmitted as refused:
            self._refused(refused, request_id, self._parts.transcription)
            await self._transcription_failed(item_id, refused.error)
            return
        except ParleyError as error:
            await self._transcription_failed(item_id, error)
            return
        except Exception:  # the transcription's own boundary: the session goes on
            log.exception("a realtime cascade transcription failed")
            await self._transcription_failed(item_id, ParleyError(INTERNAL_ERROR_MESSAGE))
            return
        item["content"][0]["transcript"] = text
        await self.send_event(
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item_id,
                "content_index": 0,
                "transcript": text,
                "usage": {"type": "duration", "seconds": job.billed},
            }
        )
        await self.send_event({"type": "conversation.item.done", "item": item})
        if answer and text.strip() and self._reply is None and item in self.items:
            self._start_reply({}, None)

    async def _transcription_failed(self, item_id: str, error: ParleyError) -> None:
        await self._send(self._error(error.message, error.code or "transcription_failed"))
        await self.send_event(
            {
                "type": "conversation.item.input_audio_transcription.failed",
                "item_id": item_id,
                "content_index": 0,
                "error": {"type": error.type, "code": error.code, "message": error.message},
            }
        )

    # The conversation

    async def _create_item(self, body: dict[str, Any], event_id: str | None) -> None:
        item = read_item(body.get("item"), event_id)
        item.setdefault("id", self.new_id("item"))
        if any(known["id"] == item["id"] for known in self.items):
            raise BadEvent(
                f"An item with id '{item['id'][:64]}' already exists.",
                code="item_exists",
                param="item.id",
                event_id=event_id,
            )
        after = body.get("previous_item_id")
        if after is None or after == "":
            self.items.append(item)
        elif after == "root":
            self.items.insert(0, item)
        else:
            place = self._item(after, event_id, param="previous_item_id")
            self.items.insert(self.items.index(place) + 1, item)
        index = self.items.index(item)
        previous = self.items[index - 1]["id"] if index else None
        audio = item.pop("_audio", None)
        await self.send_event(
            {"type": "conversation.item.added", "previous_item_id": previous, "item": item}
        )
        if audio is not None:
            self._hear(item, audio, answer=False)
            return
        await self.send_event({"type": "conversation.item.done", "item": item})

    def _item(self, item_id: Any, event_id: str | None, param: str = "item_id") -> dict[str, Any]:
        for item in self.items:
            if item["id"] == item_id:
                return item
        said = str(item_id)[:64]
        raise BadEvent(
            f"Item with item_id '{said}' not found.",
            code="item_not_found",
            param=param,
            event_id=event_id,
        )

    async def _truncate_asked(self, body: dict[str, Any], event_id: str | None) -> None:
        item = self._item(body.get("item_id"), event_id)
        end = body.get("audio_end_ms")
        spoken = self.spoken.get(item["id"])
        if spoken is None or item.get("role") != "assistant":
            raise BadEvent(
                "Only an assistant item with audio can be truncated.",
                code="invalid_value",
                param="item_id",
                event_id=event_id,
            )
        if type(end) is not int or not 0 <= end <= spoken.audio_ms:
            raise BadEvent(
                f"`audio_end_ms` must be an integer from 0 to {spoken.audio_ms}.",
                code="invalid_value",
                param="audio_end_ms",
                event_id=event_id,
            )
        await self.truncate(item, end)

    async def truncate(self, item: dict[str, Any], end_ms: int) -> None:
        """The item keeps the sentences whose audio ended by ``end_ms``: what the caller
        heard is what the chat model is later told it said."""
        spoken = self.spoken.get(item["id"], Spoken())
        kept = [text for text, ends in spoken.sentences if ends <= end_ms]
        spoken.sentences = spoken.sentences[: len(kept)]
        spoken.audio_ms = end_ms
        for part in item["content"]:
            if part.get("type") in ("output_audio", "audio"):
                part["transcript"] = " ".join(kept)
        await self.send_event(
            {
                "type": "conversation.item.truncated",
                "item_id": item["id"],
                "content_index": 0,
                "audio_end_ms": end_ms,
            }
        )

    # Responses

    async def _response_create(self, response: dict[str, Any], event_id: str | None) -> None:
        if self._reply is not None:
            raise BadEvent(
                "The conversation already has an active response; cancel it or wait for "
                "its response.done.",
                code="conversation_already_has_active_response",
                event_id=event_id,
            )
        options: dict[str, Any] = {}
        if "instructions" in response:
            options["instructions"] = read_string(
                response["instructions"], "instructions", event_id
            )
        modalities = response.get("output_modalities", response.get("modalities"))
        if modalities is not None:
            options["output_modalities"] = read_modalities(modalities, event_id)
        if "tools" in response:
            options["tools"] = read_tools(response["tools"], event_id)
        if "tool_choice" in response:
            options["tool_choice"] = response["tool_choice"]
        if response.get("max_output_tokens") is not None:
            options["max_output_tokens"] = read_limit(response["max_output_tokens"], event_id)
        audio = read_object(response.get("audio"), "response.audio", event_id)
        output = read_object(audio.get("output"), "response.audio.output", event_id)
        voice = output.get("voice", response.get("voice"))
        if isinstance(voice, dict):
            voice = voice.get("id")
        if voice is not None:
            options["voice"] = read_string(voice, "response.audio.output.voice", event_id)
        if "metadata" in response:
            options["metadata"] = response["metadata"]
        self._start_reply(options, event_id)

    def _start_reply(self, options: dict[str, Any], event_id: str | None) -> None:
        reply = Reply(self.new_id("resp"), {**self._config, **options})
        self._reply = reply
        reply.task = self.spawn(self._respond(reply))

    async def _cancel(self, reply: Reply, reason: str) -> None:
        """End a response where it is (its parts metered for what they delivered)."""
        task = reply.task
        if task is None or task.done():
            return
        reply.cancel_reason = reason
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    async def _respond(self, reply: Reply) -> None:
        """One response: the chat part streamed, its sentences spoken as they come."""
        answer: Answer | None = None
        try:
            if self._hearing:  # the turns committed before it are heard first
                await asyncio.wait(list(self._hearing.values()))
            self._key_in_force()
            self._live.turn()
            await self.send_event({"type": "response.created", "response": self._response(reply)})
            limits = await rate_limits(self._svc, scopes_for(self._caller))
            await self.send_event({"type": "rate_limits.updated", "rate_limits": limits})
            answer = Answer(self, reply)
            finish = await answer.run()
            reply.status = "incomplete" if finish == "length" else "completed"
            if finish == "length":
                reply.details = {"type": "incomplete", "reason": "max_output_tokens"}
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            if answer is not None and answer.failure is not None:  # a sentence's speech
                await self._response_failed(reply, answer.failure)
            else:
                reply.status = "cancelled"
                reply.details = {"type": "cancelled", "reason": reply.cancel_reason}
                if answer is not None:
                    await answer.cut()
        except Exception as failure:  # the response's own boundary: the session goes on
            await self._response_failed(reply, failure)
        finally:
            if answer is not None:
                await answer.close()
            self._reply = None
        await self.send_event({"type": "response.done", "response": self._response(reply)})

    async def _response_failed(self, reply: Reply, failure: BaseException) -> None:
        """A part of the response was refused or failed: the caller is told (an
        ``error`` event), and the response ends ``failed``."""
        if isinstance(failure, runner.NotAdmitted):
            error = failure.error
            await self._send(self._error(error.message, error.code or "refused"))
        elif isinstance(failure, ParleyError):
            error = failure
            await self._send(
                self._error(error.message, error.code or "upstream_error", kind=error.type)
            )
        else:
            log.error("a realtime cascade response failed", exc_info=failure)
            error = ParleyError(INTERNAL_ERROR_MESSAGE)
            await self._send(self._error(error.message, "server_error", kind="server_error"))
        reply.status = "failed"
        reply.details = {
            "type": "failed",
            "error": {"type": error.type, "code": error.code, "message": error.message},
        }

    def _key_in_force(self) -> None:
        """A key revoked while the session is open ends it (1008) at its next part."""
        key = self._svc.directory.key(self._caller.key.id)
        if key is None or key.revoked_at is not None:
            said = "This API key has been revoked."
            self._end_from_task(Ending(POLICY, said, self._error(said, "invalid_api_key")))

    def _end_from_task(self, ending: Ending) -> None:
        """End the session from a response's or transcription's task: the session's own
        task closes it; this task stops here (as cancelled)."""
        self._closing = True
        if self._failure is not None and not self._failure.done():
            self._failure.set_result(ending)
        raise asyncio.CancelledError

    def _response(self, reply: Reply) -> dict[str, Any]:
        options = reply.options
        return {
            "object": "realtime.response",
            "id": reply.id,
            "status": reply.status,
            "status_details": reply.details,
            "output": reply.output,
            "conversation_id": self.id,
            "output_modalities": options["output_modalities"],
            "max_output_tokens": options["max_output_tokens"],
            "audio": {"output": {"format": dict(PCM), "voice": options["voice"]}},
            "usage": reply.usage,
            "metadata": options.get("metadata"),
        }

    def messages(self, reply: Reply) -> list[dict[str, Any]]:
        """The conversation as chat messages: the instructions, then each item."""
        messages: list[dict[str, Any]] = []
        instructions = reply.options["instructions"]
        if instructions:
            messages.append({"role": "system", "content": instructions})
        for item in self.items:
            kind = item.get("type")
            if kind == "function_call":
                call = {
                    "id": item["call_id"],
                    "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]},
                }
                last = messages[-1] if messages else None
                if last is not None and last["role"] == "assistant":  # its text, its calls
                    last.setdefault("tool_calls", []).append(call)
                else:
                    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            elif kind == "function_call_output":
                messages.append(
                    {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]}
                )
            elif kind == "message":
                text = item_text(item)
                if text:
                    messages.append({"role": item["role"], "content": text})
        return messages

    # Parts

    def _request_id(self) -> str:
        """A part's request id: the session's id and the part's number in it."""
        return self._live.request_id()

    def _refused(self, refused: runner.NotAdmitted, request_id: str, name: str) -> None:
        """A part refused before admission: a line of the request log, as any refusal."""
        error = refused.error
        self._svc.meter.refused(
            Refusal(
                self._caller,
                request_id,
                ENDPOINT,
                error.status,
                error.code,
                time.monotonic(),
                refused.resolved,
                name,
            )
        )

    @property
    def chat_model(self) -> str:
        return self._parts.chat

    async def chat(self, body: dict[str, Any], write: Callable[[bytes], Awaitable[None]]) -> None:
        raw = orjson.dumps(body)
        job = _Chat(parse_chat(body, len(raw)), self._svc, None, None)
        await self._part(job, self._parts.chat, write)

    async def speak(
        self, text: str, voice: str | None, write: Callable[[bytes, int], Awaitable[None]]
    ) -> None:
        """One sentence spoken; ``write`` gets its PCM and the engine's rate."""
        body: dict[str, Any] = {
            "model": self._parts.speech,
            "input": text,
            "response_format": "pcm",
        }
        if voice is not None:
            body["voice"] = voice
        job = _Speech(self._svc, self._caller, body)

        async def written(pcm: bytes) -> None:
            rate = job.reply_headers.get("x-sample-rate")
            await write(pcm, int(rate) if rate else RATE)

        await self._part(job, self._parts.speech, written)

    async def _part(self, job: Any, name: str, write: Callable[[bytes], Awaitable[None]]) -> None:
        request_id = self._request_id()
        try:
            await runner.part_stream(self._svc, self._caller, job, request_id, write)
        except runner.NotAdmitted as refused:
            self._refused(refused, request_id, name)
            raise

    # Sending

    def spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def new_id(self, kind: str) -> str:
        return f"{kind}_{self._tag}{next(self._ids):x}"

    async def send_event(self, event: dict[str, Any]) -> None:
        event["event_id"] = self.new_id("event")
        await self._send(orjson.dumps(event).decode())

    async def _send(self, data: str) -> None:
        """Send one event, waiting while the caller's socket is full (at most
        ``send_timeout_seconds``: then the session ends, 1008); nothing once it ends. A
        failed send in a response's or transcription's task ends the session and that
        task (as cancelled: its part is recorded as cut)."""
        if self._closing:
            return
        try:
            async with asyncio.timeout(self._settings.send_timeout_seconds), self._sending:
                await self._socket.send_str(data)
        except TimeoutError:
            ending = Ending(POLICY, TOO_SLOW)
        except ConnectionError:
            ending = Ending(NORMAL, "The caller left.")
        else:
            return
        if asyncio.current_task() not in self._tasks:
            raise ending
        self._end_from_task(ending)

    async def _close(self, ending: Ending) -> None:
        await close_caller(self._socket, ending, self._caller, self._abort)

    def _error(
        self,
        message: str,
        code: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        event_id: str | None = None,
    ) -> str:
        return error_event(
            message,
            code=code,
            kind=kind,
            param=param,
            event_id=event_id,
            server_event_id=self.new_id("event"),
        )


def _transcript(reply: web.StreamResponse) -> str:
    body = reply.body if isinstance(reply, web.Response) else None
    found = orjson.loads(body) if isinstance(body, bytes) else None
    text = found.get("text") if isinstance(found, dict) else None
    return text.strip() if isinstance(text, str) else ""
