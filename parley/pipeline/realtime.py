"""A realtime session: the caller's WebSocket relayed to one upstream session, each turn
admitted and metered on its own (docs/realtime.md).

Two pumps run side by side. The caller's events are read one at a time
(``dialects.realtime.read_client_event``): a bad one is answered with an ``error`` event
and the session goes on; a ``response.create`` is a turn, admitted like any call (its
request counted against the group's and key's rpm, its worst case held against tpm and
the budgets) before it is sent on, and refused with an ``error`` event otherwise. The
upstream's events are relayed as they come, but for the model's name (the public one), the
rate limits (the group's, not the upstream's) and the ``error`` that answers a turn.

A turn is one usage record: its ``response.done`` is metered from the usage it reports
(text and audio input, cached, text and audio output, each at its own price); a response
the upstream began on its own (voice activity detection) is admitted when it is
announced, and cancelled at once if refused; a response cut by the session's end is billed
for what it delivered, marked estimated. Nothing is buffered beyond one event a side:
each send is awaited, so a slow upstream stops the caller's reads and a slow caller the
upstream's, and a caller that keeps an event from leaving for ``send_timeout_seconds``
is closed (1008). The session ends at its longest (1001), after its idle time (1000), or
at shutdown (an error event, then 1012).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from parley.dialects.realtime import (
    APPEND,
    ITEM_CREATE,
    RESPONSE_CREATE,
    SESSION_UPDATE,
    BadEvent,
    ClientEvent,
    Delivered,
    audio_input_tokens,
    base64_bytes,
    bytes_per_second,
    error_event,
    output_limit,
    read_client_event,
    server_event,
    session_model,
    session_update,
    transcription_part,
    transcription_usage,
    turn_usage,
    voice_of,
)
from parley.domain.models import Resolved
from parley.domain.usage import Allowance, Usage
from parley.domain.voices import clone_owner
from parley.errors import ModelNotFound, ParleyError, QuotaExceeded, RateLimited
from parley.pipeline.admit import Admission, admit, check_room, resolve_model, scopes_for
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
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
    rate_limits,
)
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.runtime.in_flight import SHUTDOWN_STATUS
from parley.runtime.live_sessions import LiveSession
from parley.settings import RealtimeSettings

log = logging.getLogger("parley.realtime")

RELAY = "relay"
"""The kind of a session relayed to an upstream realtime session (``live_session``)."""
RELAYED_CLOSES = frozenset({NORMAL, GOING_AWAY, POLICY, UPSTREAM_FAILED, RESTARTING, 1013})
"""The upstream's close codes a caller is told as they are; any other is 1011."""
OK = 200
CLIENT_CLOSED = 499
UPSTREAM_CUT = 502
TURN_REFUSED = 400
PARLEY_EVENT_ID = "parley_"
"""The prefix of the ``event_id`` Parley gives a ``response.create`` sent without one
(so an upstream's error can be tied to its turn); taken off again before the caller sees it."""
UPSTREAM_ENDED = "The upstream ended the session."
TRANSCRIBED = "conversation.item.input_audio_transcription.completed"
COMMITTED = "input_audio_buffer.committed"
INPUT_EVENTS = frozenset({COMMITTED, "input_audio_buffer.cleared", TRANSCRIBED})
TRANSCRIBERS = frozenset({"transcription"})
CHECK_AUDIO_SECONDS = 5
"""While the input is transcribed, the limits are checked once per this much audio."""
UNKNOWN_VOICE = "The voice '{}' does not exist for this model."


@dataclass(slots=True)
class Turn:
    """One response: its admitted call, and what it delivered so far."""

    call: Call
    event_id: str | None
    """The ``response.create`` it answers (``None``: the upstream began it on its own)."""
    given_id: bool
    """Parley gave the ``response.create`` its ``event_id``."""
    prompt_tokens: int
    """The turn's input as estimated at admission (billed if the turn is cut)."""
    audio_prompt_tokens: int
    delivered: Delivered = field(default_factory=Delivered)
    first_byte: float | None = None
    refused: bool = False
    """A response the upstream began that admission refused (cancelled, still metered)."""


@dataclass(slots=True)
class Conversation:
    """What the session knows of its conversation, to estimate a turn's input: its size
    as last reported, and what was added since; and its audio formats and output limit."""

    tokens: int = 0
    audio_bytes: int = 0
    characters: int = 0
    input_rate: int = 48_000
    output_rate: int = 48_000
    max_output_tokens: int | None = None

    def estimate(self, bound: int) -> tuple[int, int]:
        """The next turn's input tokens (and of them, audio), at most ``bound``."""
        audio = audio_input_tokens(self.audio_bytes, self.input_rate)
        total = min(self.tokens + audio + -(-self.characters // 4), bound)
        return total, min(audio, total)

    def heard(self, usage: Usage) -> None:
        """A response ended: the conversation now holds its input and output."""
        self.tokens = usage.total_tokens
        self.audio_bytes = self.characters = 0

    def configured(self, session: Any) -> None:
        """A session object from the upstream: its formats and output limit."""
        if not isinstance(session, dict):
            return
        audio = session.get("audio") if isinstance(session.get("audio"), dict) else {}
        for side in ("input", "output"):
            part = audio.get(side) if isinstance(audio, dict) else None
            if isinstance(part, dict) and "format" in part:
                rate = bytes_per_second(part["format"])
                if side == "input":
                    self.input_rate = rate
                else:
                    self.output_rate = rate
        limit = session.get("max_output_tokens")
        self.max_output_tokens = limit if type(limit) is int and limit > 0 else None


class Session:
    """One realtime session between a caller and an upstream (see the module's docstring)."""

    def __init__(
        self,
        svc: Services,
        caller: Caller,
        *,
        model: Resolved,
        route: Route,
        socket: web.WebSocketResponse,
        upstream: aiohttp.ClientWebSocketResponse,
        abort: Callable[[], None],
        live: LiveSession,
        bound: dict[str, Any] | None = None,
    ) -> None:
        self._svc = svc
        self._live = live
        """The session's entry in the book of live sessions: its id begins the request id
        of each of its request-log lines."""
        self._caller = caller
        self._model = model
        self._route = route
        self._socket = socket
        self._upstream = upstream
        self._abort = abort
        self._settings: RealtimeSettings = svc.settings.realtime
        self._pending: deque[Turn] = deque()
        self._open: dict[str, Turn] = {}
        self._conversation = Conversation()
        self._ids = itertools.count(1)
        self._scopes = scopes_for(caller)
        self._sending = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self._sender: asyncio.Task[Any] | None = None
        """The task sending the caller an event now (``None``: none is)."""
        self._send_began = 0.0
        self._watchdog: asyncio.TimerHandle | None = None
        """Due when the event being sent would have waited ``send_timeout_seconds``."""
        self._too_slow: asyncio.Task[Any] | None = None
        """The sender the watchdog cancelled: its send ends the session (1008)."""
        self._bound = bound
        """The session configuration a client secret is bound to: the session's first
        ``session.update``, checked as the caller's own would be."""
        self._transcription: Resolved | None = None
        """The transcription model the input is transcribed by, once the caller sets one."""
        self._uncommitted = 0
        """Input audio bytes appended since the buffer was last committed or cleared."""
        self._unchecked = 0
        """Input audio bytes appended since the limits were last checked (transcription)."""
        self._committed: dict[str, int] = {}
        """Each committed item's audio bytes, until its transcription is metered."""

    async def run(self, task: asyncio.Task[Any]) -> None:
        """Relay until either side ends, the session's time is up, or shutdown; every
        turn admitted is metered once before this returns."""
        pumps = (
            asyncio.create_task(self._from_caller(), name="parley-realtime-caller"),
            asyncio.create_task(self._from_upstream(), name="parley-realtime-upstream"),
        )
        status = CLIENT_CLOSED
        ending: Ending | None = None
        try:
            async with asyncio.timeout(self._settings.max_session_seconds):
                done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            ended = next(iter(done)).exception()
            if isinstance(ended, Ending):
                ending = ended
                status = UPSTREAM_CUT if ended.upstream else CLIENT_CLOSED
            elif ended is not None:
                raise ended
        except TimeoutError:
            seconds = f"{self._settings.max_session_seconds:g}"
            ending = Ending(GOING_AWAY, SESSION_OVER.format(seconds))
        except asyncio.CancelledError:
            if not self._svc.in_flight.ending(task):
                raise
            task.uncancel()
            status = SHUTDOWN_STATUS
            said = self._error(SHUTTING_DOWN, "service_unavailable", kind="server_error")
            ending = Ending(RESTARTING, SHUTTING_DOWN, said)
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
            await _stop(pumps)  # nothing reads the caller's socket while it closes
            self._end_turns(status)  # metered before the caller hears the end
            if ending is not None:
                await self._close(ending)

    # The caller's side

    async def _from_caller(self) -> None:
        socket, idle = self._socket, self._settings.idle_seconds
        if self._bound is not None:
            await self._client_event(session_update(self._bound))
        while True:
            try:
                message = await socket.receive(timeout=idle)
            except TimeoutError:
                said = IDLE.format(f"{idle:g}")
                raise Ending(NORMAL, said, self._error(said, "session_idle")) from None
            if message.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                await self._client_event(message.data)
            elif message.type == aiohttp.WSMsgType.ERROR:
                said = TOO_LARGE.format(self._settings.max_event_bytes)
                raise Ending(TOO_BIG, said)
            else:  # the caller closed
                return

    async def _client_event(self, frame: str | bytes) -> None:
        try:
            event = read_client_event(frame, self._settings.max_audio_chunk_bytes)
            forward = await self._prepared(event, frame)
        except BadEvent as bad:
            await self._send(
                self._error(bad.message, bad.code, param=bad.param, event_id=bad.event_id)
            )
            return
        if forward is None:  # a turn refused: the caller was told
            return
        try:
            await self._upstream.send_str(forward if isinstance(forward, str) else forward.decode())
        except ConnectionError:
            raise Ending(UPSTREAM_FAILED, UPSTREAM_ENDED, upstream=True) from None

    async def _prepared(self, event: ClientEvent, frame: str | bytes) -> str | bytes | None:
        """What to send upstream for ``event`` (``None``: nothing); raises ``BadEvent``
        for an event that may not go."""
        voice = voice_of(event) if event.type in (SESSION_UPDATE, RESPONSE_CREATE) else None
        if voice is not None and not self._may_use(voice):
            raise BadEvent(
                UNKNOWN_VOICE.format(voice[:100]),
                code="voice_not_found",
                param="voice",
                event_id=event.event_id,
            )
        if event.type == APPEND:
            heard = base64_bytes(event.body["audio"])
            await self._audio_admitted(heard, event.event_id)
            self._conversation.audio_bytes += heard
            self._uncommitted += heard
        elif event.type == ITEM_CREATE:
            self._conversation.characters += len(frame)
        elif event.type == SESSION_UPDATE:
            self._transcribed_by(event)
            session_model(event, self._route.target.model)
            return event.encoded()
        elif event.type == RESPONSE_CREATE:
            turn = await self._admit(event)
            if turn is None:
                return None
            self._pending.append(turn)
            return event.encoded()
        return frame

    def _transcribed_by(self, event: ClientEvent) -> None:
        """The input transcription a ``session.update`` turns on must be a transcription
        model the key may use, served by this session's channel: its usage is billed at
        that model's price (its name rewritten to the channel's)."""
        part = transcription_part(event)
        if part is None:
            return
        param = "session.audio.input.transcription.model"
        name = part["model"]
        try:
            if not isinstance(name, str):
                raise ModelNotFound(str(name)[:100])
            model = resolve_model(self._svc.models, self._caller, name, TRANSCRIBERS, ENDPOINT)
        except ParleyError as refused:
            raise BadEvent(
                refused.message,
                code=refused.code or "invalid_value",
                param=param,
                event_id=event.event_id,
            ) from None
        channel = self._route.target.channel
        here = [r for r in self._svc.router.routes(model.spec.name) if r.target.channel == channel]
        if not here:
            raise BadEvent(
                f"The transcription model `{name}` is not served by this session's channel.",
                code="model_not_supported",
                param=param,
                event_id=event.event_id,
            )
        part["model"] = here[0].target.model
        self._transcription = model

    async def _audio_admitted(self, heard: int, event_id: str | None) -> None:
        """While the upstream transcribes the input, every few seconds of audio is checked
        against the group's rates and budgets before it is sent (a transcription-only
        session has no turn to admit)."""
        if self._transcription is None:
            return
        self._unchecked += heard
        if self._unchecked < self._conversation.input_rate * CHECK_AUDIO_SECONDS:
            return
        self._unchecked = 0
        try:
            await check_room(self._svc.limiter, self._svc.meter.ledger, self._caller)
        except ParleyError as refused:
            raise BadEvent(
                refused.message, code=refused.code or "refused", event_id=event_id
            ) from None

    def _may_use(self, voice: str) -> bool:
        """A voice is the upstream's, never a Parley clone id (those belong to speech
        models) nor a hosted voice id another group's clone is known by."""
        if clone_owner(voice) is not None:
            return False
        owners = self._svc.clones.engine_name_owners(voice)
        return not owners or self._caller.group.id in owners

    async def _admit(self, event: ClientEvent | None) -> Turn | None:
        """The turn a ``response.create`` (or, ``None``, the upstream) begins, admitted;
        ``None`` when refused (the caller is told with an ``error`` event)."""
        svc, settings = self._svc, self._settings
        key = svc.directory.key(self._caller.key.id)
        if key is None or key.revoked_at is not None:  # revoked while the session was open
            said = "This API key has been revoked."
            raise Ending(POLICY, said, self._error(said, "invalid_api_key"))
        bound = self._model.spec.context_window or settings.turn_input_tokens
        prompt, audio = self._conversation.estimate(bound)
        session_limit = self._conversation.max_output_tokens
        limit = output_limit(event, session_limit) if event is not None else session_limit
        # With no limit (or "inf"), the output is held at the default but not capped there.
        max_out = limit or settings.turn_output_tokens
        event_id = event.event_id if event is not None else None
        request_id = self._live.request_id()
        asked = time.monotonic()
        allowance = Allowance(
            prompt_tokens=bound, completion_tokens=max_out, open_ended=limit is None
        )
        try:
            admission = await admit(
                svc.limiter,
                svc.meter.ledger,
                self._caller,
                prompt + max_out,
                hold=request_id,
                allowance=allowance,
                price=self._model.spec.price,
                release=svc.meter.release,
            )
        except ParleyError as refusal:
            if isinstance(refusal, RateLimited | QuotaExceeded):
                svc.watchers.tell_refusal(self._caller, refusal)
            svc.meter.refused(
                Refusal(
                    self._caller,
                    request_id,
                    ENDPOINT,
                    refusal.status,
                    refusal.code,
                    asked,
                    self._model.spec.name,
                    self._model.requested,
                )
            )
            await self._send(
                self._error(refusal.message, refusal.code or "refused", event_id=event_id)
            )
            if event is None:  # its record is the refusal's line's sibling, with an id of its own
                return self._unadmitted(self._live.request_id(), allowance, prompt, audio)
            return None
        given = False
        if event is not None and event_id is None:
            event_id = event.body["event_id"] = f"{PARLEY_EVENT_ID}{next(self._ids)}"
            given = True
        call = Call(request_id, ENDPOINT, self._caller, self._model, admission)
        self._live.turn()
        return Turn(call, event_id, given, prompt, audio)

    def _unadmitted(self, request_id: str, allowance: Allowance, prompt: int, audio: int) -> Turn:
        """A response the upstream began that was refused: it is cancelled, and metered
        for what the upstream still reports (it is billed to Parley all the same)."""
        admission = Admission((), 0, allowance)
        call = Call(request_id, ENDPOINT, self._caller, self._model, admission)
        return Turn(call, None, False, prompt, audio, refused=True)

    # The upstream's side

    async def _from_upstream(self) -> None:
        async for message in self._upstream:
            if message.type == aiohttp.WSMsgType.TEXT:
                relayed = await self._server_event(message.data)
                if relayed is not None:
                    await self._send(relayed)
            elif message.type == aiohttp.WSMsgType.BINARY:
                await self._send(message.data)
            elif message.type == aiohttp.WSMsgType.ERROR:
                break
        code = self._upstream.close_code
        if code in RELAYED_CLOSES:
            raise Ending(code, UPSTREAM_ENDED, upstream=True)
        said = self._error(UPSTREAM_ENDED, "upstream_closed", kind="server_error")
        raise Ending(UPSTREAM_FAILED, UPSTREAM_ENDED, said, upstream=True)

    async def _server_event(self, frame: str) -> str | None:
        """What the caller is sent for an upstream's event (``None``: nothing)."""
        kind, body = server_event(frame)
        if kind in ("response.output_audio.delta", "response.output_audio_transcript.delta"):
            turn = self._turn_of(body)
            if turn is not None:
                turn.delivered.add(kind, body)
            return frame
        if kind in ("session.created", "session.updated"):
            session = body.get("session")
            self._conversation.configured(session)
            if isinstance(session, dict) and "model" in session:
                session["model"] = self._model.spec.name
                return orjson.dumps(body).decode()
            return frame
        if kind == "response.created":
            await self._response_created(body.get("response"))
        elif kind == "response.done":
            self._response_done(body.get("response"))
        elif kind == "rate_limits.updated":
            body["rate_limits"] = await self._rate_limits()
            return orjson.dumps(body).decode()
        elif kind == "error":
            return self._upstream_error(body, frame)
        elif kind in INPUT_EVENTS:
            self._input_event(kind, body)
        else:
            turn = self._turn_of(body)
            if turn is not None:
                turn.delivered.add(kind, body)
        return frame

    def _turn_of(self, body: dict[str, Any]) -> Turn | None:
        """The open turn a server event belongs to (by its ``response_id``), if any."""
        response_id = body.get("response_id")
        return self._open.get(response_id) if isinstance(response_id, str) else None

    async def _response_created(self, response: Any) -> None:
        response_id = response.get("id") if isinstance(response, dict) else None
        if not isinstance(response_id, str):
            return
        turn = self._pending.popleft() if self._pending else await self._admit(None)
        if turn is None:
            return
        if turn.refused:  # the upstream's own turn, refused: cancelled at once
            cancel = {"type": "response.cancel", "response_id": response_id}
            with contextlib.suppress(ConnectionError):
                await self._upstream.send_str(orjson.dumps(cancel).decode())
        turn.first_byte = turn.call.age()
        self._open[response_id] = turn
        self._conversation.audio_bytes = self._conversation.characters = 0

    def _response_done(self, response: Any) -> None:
        response_id = response.get("id") if isinstance(response, dict) else None
        turn = self._open.pop(response_id, None) if isinstance(response_id, str) else None
        if turn is None:
            return
        assert isinstance(response, dict)
        usage = turn_usage(response)
        if usage is None:  # nothing valid reported: what it delivered, estimated
            usage = self._delivered(turn)
        else:
            self._conversation.heard(usage)
        failed = response.get("status") == "failed"
        self._finish(turn, usage, UPSTREAM_CUT if failed else OK, billable=True)

    def _upstream_error(self, body: dict[str, Any], frame: str) -> str:
        """An upstream's ``error``: one that answers a turn's ``response.create`` ends that
        turn (metered, billed nothing); an ``event_id`` Parley gave is taken off."""
        error = body.get("error")
        if not isinstance(error, dict):
            return frame
        event_id = error.get("event_id")
        turn = next((t for t in self._pending if t.event_id == event_id), None)
        if event_id is None or turn is None:
            return frame
        self._pending.remove(turn)
        code = error.get("code")
        said = code if isinstance(code, str) else None
        self._finish(turn, Usage(), TURN_REFUSED, billable=False, code=said)
        if turn.given_id:
            del error["event_id"]
            return orjson.dumps(body).decode()
        return frame

    def _input_event(self, kind: str, body: dict[str, Any]) -> None:
        """The input buffer committed (its audio kept for the item's transcription) or
        cleared, or an item's transcription done (metered)."""
        if kind == TRANSCRIBED:
            self._transcribed(body)
            return
        item = body.get("item_id")
        if kind == COMMITTED and isinstance(item, str) and self._transcription is not None:
            self._committed[item] = self._uncommitted
        self._uncommitted = 0

    def _transcribed(self, body: dict[str, Any]) -> None:
        """An item's input transcription: one usage record at the transcription model's
        price (its audio as Parley counted it, and the tokens the upstream reports)."""
        model = self._transcription
        item = body.get("item_id")
        if model is None or not isinstance(item, str) or item not in self._committed:
            return
        audio = self._committed.pop(item)
        audio_ms = audio * 1000 // max(self._conversation.input_rate, 1)
        usage = transcription_usage(body, audio_ms)
        allowance = Allowance(usage.prompt_tokens, usage.completion_tokens, audio_ms=audio_ms)
        call = Call(
            self._live.request_id(),
            ENDPOINT,
            self._caller,
            model,
            Admission((), 0, allowance),
        )
        self._svc.meter.finish(
            call, usage=usage, status=OK, channel=self._route.target.channel, billable=True
        )

    async def _rate_limits(self) -> list[dict[str, Any]]:
        return await rate_limits(self._svc, self._scopes)

    # Sending, closing and metering

    async def _send(self, data: str | bytes) -> None:
        """Send one event to the caller, waiting while the caller's socket is full (at
        most ``send_timeout_seconds``: then the session ends, 1008).

        The bound is kept by one timer a session (``_watch``), not a timeout around each
        send: nearly every send returns at once, and a timer armed and cancelled for each
        is a large share of an event's relay (docs/performance.md, Speed habits)."""
        async with self._sending:
            sender = self._sender = asyncio.current_task()
            self._send_began = self._loop.time()
            if self._watchdog is None:
                due = self._send_began + self._settings.send_timeout_seconds
                self._watchdog = self._loop.call_at(due, self._watch)
            try:
                if isinstance(data, str):
                    await self._socket.send_str(data)
                else:
                    await self._socket.send_bytes(data)
            except asyncio.CancelledError:
                if sender is None or self._too_slow is not sender or sender.uncancel():
                    raise
                raise Ending(POLICY, TOO_SLOW) from None
            except ConnectionError:
                raise Ending(NORMAL, "The caller left.") from None
            finally:
                self._sender = None

    def _watch(self) -> None:
        """The send timer: a send under way for ``send_timeout_seconds`` is cancelled
        (its session ends, 1008); one under way for less is looked at again when it
        would reach them; with none under way, the next send sets the timer again."""
        self._watchdog = None
        sender = self._sender
        if sender is None:
            return
        due = self._send_began + self._settings.send_timeout_seconds
        if self._loop.time() >= due:
            self._too_slow = sender
            sender.cancel()
        else:
            self._watchdog = self._loop.call_at(due, self._watch)

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
            server_event_id=f"event_parley_{next(self._ids)}",
        )

    def _delivered(self, turn: Turn) -> Usage:
        return turn.delivered.usage(
            turn.prompt_tokens, turn.audio_prompt_tokens, self._conversation.output_rate
        )

    def _end_turns(self, status: int) -> None:
        """The session ended: a turn never begun costs nothing, a turn cut midway is
        billed for what it delivered (estimated)."""
        while self._pending:
            self._finish(self._pending.popleft(), Usage(), status, billable=False)
        for turn in self._open.values():
            self._finish(turn, self._delivered(turn), status, billable=True)
        self._open.clear()

    def _finish(
        self, turn: Turn, usage: Usage, status: int, *, billable: bool, code: str | None = None
    ) -> None:
        self._svc.meter.finish(
            turn.call,
            usage=usage,
            status=status,
            channel=self._route.target.channel,
            billable=billable,
            error_code=code,
            first_byte=turn.first_byte,
        )


async def _stop(pumps: tuple[asyncio.Task[None], ...]) -> None:
    """Cancel the pumps and wait for them to end."""
    for pump in pumps:
        pump.cancel()
    for pump in pumps:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await pump
