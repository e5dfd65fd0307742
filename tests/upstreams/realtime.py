"""A fake OpenAI Realtime server (GA interface) over a real WebSocket, written from
OpenAI's Realtime reference (client and server events, ``RealtimeResponse``, its usage).

Routes: ``GET /v1/realtime?model=…`` (OpenAI: ``Authorization: Bearer``), and Azure's
``GET /openai/v1/realtime?model=…`` and ``GET /openai/realtime?api-version=…&deployment=…``
(``api-key``). A wrong key is a 401 handshake, an unknown model a 400.

A session starts with ``session.created`` and answers:

- ``session.update`` with ``session.updated`` (the session merged);
- ``input_audio_buffer.append`` by keeping the audio; under ``server_vad`` (the default),
  audio with sound is speech (``speech_started``) and a silent chunk after it ends it
  (``speech_stopped``, ``committed``, the item, and a response when ``create_response``);
- ``input_audio_buffer.commit`` / ``clear``, ``conversation.item.create`` / ``delete``;
- ``response.create`` with a response streamed as OpenAI's are (``response.created``,
  ``rate_limits.updated``, the output item and part, ``behaviour.audio_chunks`` audio deltas
  of ``behaviour.chunk_bytes`` with their transcript, the ``.done`` events, then
  ``response.done`` with usage); a second one while one is active is an ``error`` with
  ``conversation_already_has_active_response``; ``response.cancel`` ends it ``cancelled``.

Usage is counted as OpenAI does: input audio a token per 100 ms, output audio a token per
50 ms, text four characters a token; the conversation's tokens are each response's input,
``behaviour.cached_tokens`` of them (audio first) from the cache.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import WSMsgType, web

from tests.upstreams.server import FakeServer, json_reply, openai_error

JSON = dict[str, Any]
PCM_RATE = 48_000  # bytes a second of 16-bit mono at 24 kHz
TRANSCRIPT = "Hello there, how can I help?"


@dataclass
class RealtimeBehaviour:
    audio_chunks: int = 3
    chunk_bytes: int = 4800  # 100 ms of PCM16 at 24 kHz
    delay: float = 0.0
    """Seconds between two deltas."""
    cached_tokens: int = 0
    usage: Any = None
    """Reported as the usage instead of the real count (``None``: the real count)."""
    prelude: list[Any] = field(default_factory=list)
    """Events (or raw frames, as strings) sent before each response: a hostile upstream's."""
    close_after_deltas: int | None = None
    """Close the socket (1011) after this many audio deltas of a response."""
    rate_limits: list[JSON] = field(
        default_factory=lambda: [
            {"name": "requests", "limit": 5000, "remaining": 4999, "reset_seconds": 0.01},
            {"name": "tokens", "limit": 40000, "remaining": 39000, "reset_seconds": 1.5},
        ]
    )


@dataclass
class Connection:
    """What one session received: its query, headers, and every client event."""

    path: str
    query: dict[str, str]
    headers: dict[str, str]
    events: list[JSON] = field(default_factory=list)

    def of_type(self, kind: str) -> list[JSON]:
        return [event for event in self.events if event.get("type") == kind]


@dataclass
class FakeRealtime(FakeServer):
    api_key: str | None = None
    models: tuple[str, ...] = ("gpt-realtime",)
    behaviour: RealtimeBehaviour = field(default_factory=RealtimeBehaviour)
    connections: list[Connection] = field(default_factory=list)

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/realtime", self._openai)
        app.router.add_get("/openai/v1/realtime", self._azure)
        app.router.add_get("/openai/realtime", self._azure)
        return app

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None and (
            request.headers.get("Authorization") != f"Bearer {self.api_key}"
        ):
            return json_reply(401, openai_error("Incorrect API key", "invalid_request_error"))
        return await self._session(request, request.query.get("model", ""))

    async def _azure(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None and request.headers.get("api-key") != self.api_key:
            return json_reply(401, openai_error("Access denied", "invalid_request_error"))
        model = request.query.get("deployment") or request.query.get("model", "")
        return await self._session(request, model)

    async def _session(self, request: web.Request, model: str) -> web.StreamResponse:
        if model not in self.models:
            error = openai_error(f"Unknown model {model}", "invalid_request_error")
            return json_reply(400, error)
        connection = Connection(request.path, dict(request.query), dict(request.headers))
        self.connections.append(connection)
        socket = web.WebSocketResponse(max_msg_size=64 * 1024 * 1024)
        await socket.prepare(request)
        await _Session(socket, model, self.behaviour, connection).run()
        return socket


class _Session:
    def __init__(
        self,
        socket: web.WebSocketResponse,
        model: str,
        behaviour: RealtimeBehaviour,
        connection: Connection,
    ) -> None:
        self.socket = socket
        self.behaviour = behaviour
        self.connection = connection
        self.ids = itertools.count(1)
        self.session: JSON = {
            "type": "realtime",
            "object": "realtime.session",
            "id": "sess_fake",
            "model": model,
            "output_modalities": ["audio"],
            "instructions": "",
            "max_output_tokens": "inf",
            "expires_at": 0,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": None,
                    "turn_detection": {
                        "type": "server_vad",
                        "threshold": 0.5,
                        "prefix_padding_ms": 300,
                        "silence_duration_ms": 500,
                        "create_response": True,
                        "interrupt_response": True,
                    },
                },
                "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "alloy"},
            },
        }
        self.buffer = bytearray()
        self.speaking = False
        self.conversation_audio = 0  # bytes
        self.conversation_text = 0  # characters
        self.last_item: str | None = None
        self.active: asyncio.Task[None] | None = None
        self.cancelled = False

    def id(self, prefix: str) -> str:
        return f"{prefix}_{next(self.ids)}"

    async def send(self, event: JSON) -> None:
        event.setdefault("event_id", self.id("event"))
        await self.socket.send_str(orjson.dumps(event).decode())

    async def error(
        self, message: str, code: str, event_id: str | None, param: str | None = None
    ) -> None:
        await self.send(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "code": code,
                    "message": message,
                    "param": param,
                    "event_id": event_id,
                },
            }
        )

    async def run(self) -> None:
        await self.send({"type": "session.created", "session": self.session})
        try:
            async for message in self.socket:
                if message.type != WSMsgType.TEXT:
                    continue
                event = orjson.loads(message.data)
                self.connection.events.append(event)
                await self.handle(event)
        finally:
            if self.active is not None:
                self.active.cancel()

    async def handle(self, event: JSON) -> None:
        kind = event.get("type")
        event_id = event.get("event_id")
        if kind == "session.update":
            await self.update_session(event.get("session") or {})
        elif kind == "input_audio_buffer.append":
            try:
                audio = base64.b64decode(event["audio"], validate=True)
            except ValueError:
                await self.error("Invalid base64 audio", "invalid_value", event_id, "audio")
                return
            await self.append(audio)
        elif kind == "input_audio_buffer.commit":
            if not self.buffer:
                await self.error("Buffer is empty", "input_audio_buffer_commit_empty", event_id)
                return
            await self.commit()
        elif kind == "input_audio_buffer.clear":
            self.buffer.clear()
            await self.send({"type": "input_audio_buffer.cleared"})
        elif kind == "conversation.item.create":
            item = dict(event.get("item") or {})
            item.setdefault("id", self.id("item"))
            for part in item.get("content") or ():
                self.conversation_text += len(part.get("text") or "")
            await self.item_added(item)
        elif kind == "conversation.item.delete":
            await self.send({"type": "conversation.item.deleted", "item_id": event.get("item_id")})
        elif kind == "response.create":
            if self.active is not None and not self.active.done():
                await self.error(
                    "Conversation already has an active response in progress",
                    "conversation_already_has_active_response",
                    event_id,
                )
                return
            self.start_response(event.get("response") or {})
        elif kind == "response.cancel":
            self.cancelled = True

    async def update_session(self, session: JSON) -> None:
        given = dict(session)
        audio = given.pop("audio", None) or {}
        for side in ("input", "output"):
            self.session["audio"][side].update(audio.get(side) or {})
        self.session.update(given)
        await self.send({"type": "session.updated", "session": self.session})

    async def append(self, audio: bytes) -> None:
        vad = (self.session["audio"]["input"] or {}).get("turn_detection")
        self.buffer.extend(audio)
        if not vad:
            return
        sound = any(audio)
        if sound and not self.speaking:
            self.speaking = True
            await self.send(
                {
                    "type": "input_audio_buffer.speech_started",
                    "item_id": self.id("item"),
                    "audio_start_ms": 0,
                }
            )
        elif not sound and self.speaking:
            self.speaking = False
            await self.send(
                {"type": "input_audio_buffer.speech_stopped", "item_id": "", "audio_end_ms": 0}
            )
            await self.commit()
            if vad.get("create_response", True):
                self.start_response({})

    async def commit(self) -> None:
        item_id = self.id("item")
        audio = len(self.buffer)
        self.conversation_audio += audio
        self.buffer.clear()
        await self.send(
            {
                "type": "input_audio_buffer.committed",
                "item_id": item_id,
                "previous_item_id": self.last_item,
            }
        )
        await self.item_added(
            {
                "id": item_id,
                "type": "message",
                "role": "user",
                "content": [{"type": "input_audio", "transcript": None}],
            }
        )
        transcription = (self.session["audio"]["input"] or {}).get("transcription")
        if transcription:
            await self.transcribe(item_id, audio)

    async def transcribe(self, item_id: str, audio: int) -> None:
        """OpenAI's input transcription events for a committed item, with token usage."""
        tokens = audio * 10 // PCM_RATE
        ids = {"item_id": item_id, "content_index": 0}
        await self.send(
            {"type": "conversation.item.input_audio_transcription.delta", **ids, "delta": "Hi"}
        )
        usage = {
            "type": "tokens",
            "input_tokens": tokens,
            "output_tokens": 1,
            "total_tokens": tokens + 1,
            "input_token_details": {"text_tokens": 0, "audio_tokens": tokens},
        }
        await self.send(
            {
                "type": "conversation.item.input_audio_transcription.completed",
                **ids,
                "transcript": "Hi",
                "usage": usage,
            }
        )

    async def item_added(self, item: JSON) -> None:
        previous, self.last_item = self.last_item, item["id"]
        item = {"object": "realtime.item", "status": "completed", **item}
        await self.send(
            {"type": "conversation.item.added", "previous_item_id": previous, "item": item}
        )
        await self.send(
            {"type": "conversation.item.done", "previous_item_id": previous, "item": item}
        )

    def start_response(self, options: JSON) -> None:
        self.cancelled = False
        self.active = asyncio.create_task(self.respond(options))

    def input_usage(self) -> JSON:
        audio = self.conversation_audio * 10 // PCM_RATE
        text = -(-self.conversation_text // 4)
        cached = min(self.behaviour.cached_tokens, audio + text)
        cached_audio = min(cached, audio)
        return {
            "input_tokens": audio + text,
            "input_token_details": {
                "text_tokens": text,
                "audio_tokens": audio,
                "image_tokens": 0,
                "cached_tokens": cached,
                "cached_tokens_details": {
                    "text_tokens": cached - cached_audio,
                    "audio_tokens": cached_audio,
                    "image_tokens": 0,
                },
            },
        }

    async def send_prelude(self) -> None:
        for odd in self.behaviour.prelude:
            if isinstance(odd, str):
                await self.socket.send_str(odd)
            else:
                await self.send(dict(odd))

    async def respond(self, options: JSON) -> None:
        behaviour = self.behaviour
        response_id = self.id("resp")
        modalities = options.get("output_modalities") or self.session["output_modalities"]
        audio = "audio" in modalities
        limit = options.get("max_output_tokens", self.session.get("max_output_tokens"))
        response: JSON = {
            "id": response_id,
            "object": "realtime.response",
            "status": "in_progress",
            "status_details": None,
            "output": [],
            "output_modalities": modalities,
            "conversation_id": "conv_fake",
            "max_output_tokens": limit,
            "usage": None,
        }
        await self.send_prelude()
        await self.send({"type": "response.created", "response": dict(response)})
        await self.send({"type": "rate_limits.updated", "rate_limits": behaviour.rate_limits})
        item_id = self.id("item")
        item = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        ids = {
            "response_id": response_id,
            "item_id": item_id,
            "output_index": 0,
            "content_index": 0,
        }
        await self.send(
            {
                "type": "response.output_item.added",
                "response_id": response_id,
                "output_index": 0,
                "item": item,
            }
        )
        part_type = "audio" if audio else "text"
        await self.send({"type": "response.content_part.added", **ids, "part": {"type": part_type}})
        sent_audio = 0
        said = ""
        words = TRANSCRIPT.split(" ")
        status = "completed"
        for index in range(behaviour.audio_chunks):
            if self.cancelled:
                status = "cancelled"
                break
            if isinstance(limit, int) and (sent_audio * 20 // PCM_RATE) + len(said) // 4 >= limit:
                status = "incomplete"
                break
            word = words[index % len(words)] + " "
            if audio:
                chunk = bytes([index % 251 + 1]) * behaviour.chunk_bytes
                await self.send(
                    {
                        "type": "response.output_audio.delta",
                        **ids,
                        "delta": base64.b64encode(chunk).decode(),
                    }
                )
                sent_audio += len(chunk)
                await self.send(
                    {"type": "response.output_audio_transcript.delta", **ids, "delta": word}
                )
            else:
                await self.send({"type": "response.output_text.delta", **ids, "delta": word})
            said += word
            if (
                behaviour.close_after_deltas is not None
                and index + 1 >= behaviour.close_after_deltas
            ):
                await self.socket.close(code=1011, message=b"upstream failure")
                return
            await asyncio.sleep(behaviour.delay)
        if audio:
            await self.send({"type": "response.output_audio.done", **ids})
            await self.send(
                {"type": "response.output_audio_transcript.done", **ids, "transcript": said}
            )
        else:
            await self.send({"type": "response.output_text.done", **ids, "text": said})
        audio_out = sent_audio * 20 // PCM_RATE
        text_out = -(-len(said) // 4)
        usage = {
            **self.input_usage(),
            "output_tokens": audio_out + text_out,
            "output_token_details": {"text_tokens": text_out, "audio_tokens": audio_out},
        }
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        if behaviour.usage is not None:
            usage = behaviour.usage
        self.conversation_text += len(said)
        self.conversation_audio += sent_audio // 2
        response.update(status=status, usage=usage, output=[{**item, "status": "completed"}])
        if status != "completed":
            response["status_details"] = {
                "type": status,
                "reason": "client_cancelled" if status == "cancelled" else "max_output_tokens",
            }
        await self.send({"type": "response.done", "response": response})


async def serve_forever(port: int, delay: float, chunks: int) -> None:
    """Run the fake on ``port`` (``api_key`` unchecked), each response ``chunks`` audio
    deltas ``delay`` seconds apart: ``python -m tests.upstreams.realtime PORT DELAY N``."""
    behaviour = RealtimeBehaviour(audio_chunks=chunks, delay=delay)
    async with FakeRealtime(port=port, behaviour=behaviour):
        await asyncio.Event().wait()


if __name__ == "__main__":
    import sys

    asyncio.run(serve_forever(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])))
