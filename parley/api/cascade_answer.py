"""One response of a cascade session (``api/cascade.py``): the chat part streamed, its
text told as ``response.*`` events as it comes and, for an audio response, cut into
sentences, each spoken by the speech part while the next is written.

The answer knows its session only as a ``Stage``: the conversation's items and audio
sent so far, the parts (chat, speech) as calls through the runner, and the sending of
server events. The session's protocol (client events, the input buffer, voice
detection, barge-in) is the session's.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from parley.audio.resample import Resampler
from parley.dialects.realtime_fields import (
    RATE,
)
from parley.domain.sentences import Sentences

BYTES_PER_MS = RATE * 2 // 1000
DELTA_BYTES = RATE * 2 // 5
"""Output audio leaves in deltas of at most this many bytes (a fifth of a second)."""


class Stage(Protocol):
    """What an answer speaks through: its session (``api/cascade.py``)."""

    items: list[dict[str, Any]]
    """The conversation's items, in order."""
    spoken: dict[str, Spoken]
    """Each assistant item's audio as sent, by item id."""

    @property
    def chat_model(self) -> str:
        """The cascade's chat model."""
        ...

    def messages(self, reply: Reply) -> list[dict[str, Any]]:
        """The conversation as a chat body's messages, for ``reply``."""
        ...

    async def chat(self, body: dict[str, Any], write: Callable[[bytes], Awaitable[None]]) -> None:
        """The chat part, its stream's bytes handed to ``write``."""
        ...

    async def speak(
        self, text: str, voice: str | None, write: Callable[[bytes, int], Awaitable[None]]
    ) -> None:
        """The speech part for one sentence, its PCM and the engine's rate handed to
        ``write``."""
        ...

    async def send_event(self, event: dict[str, Any]) -> None:
        """One server event to the caller."""
        ...

    def new_id(self, kind: str) -> str:
        """A new id of the session's, of ``kind`` (``item``, ``call``, ``event``...)."""
        ...

    def spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        """``work`` as a task of the session's."""
        ...

    async def truncate(self, item: dict[str, Any], end_ms: int) -> None:
        """``item`` cut to the sentences whose audio ended by ``end_ms``."""
        ...


@dataclass(slots=True)
class Spoken:
    """An assistant item's audio as sent: each sentence with where its audio ends."""

    sentences: list[tuple[str, int]] = field(default_factory=list)
    audio_ms: int = 0


@dataclass(slots=True)
class Reply:
    """One response: its options, what it produced, and how it ended."""

    id: str
    options: dict[str, Any]
    status: str = "in_progress"
    details: dict[str, Any] | None = None
    output: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    task: asyncio.Task[None] | None = None
    cancel_reason: str = "client_cancelled"


class Answer:
    """One response's output: the chat part streamed, its text told as it comes and,
    for an audio response, spoken sentence by sentence while the rest is written."""

    def __init__(self, session: Stage, reply: Reply) -> None:
        self._session = session
        self._reply = reply
        self._audio = "audio" in reply.options["output_modalities"]
        self._message: dict[str, Any] | None = None
        self._part: dict[str, Any] = {}
        self._index = 0
        self._text: list[str] = []
        self._calls: dict[int, tuple[int, dict[str, Any]]] = {}
        self._sentences = Sentences()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._speaker: asyncio.Task[None] | None = None
        self._spoken = Spoken()
        self._sse = b""
        self._finish: str | None = None
        self._cut = False
        self.failure: Exception | None = None
        """Why a sentence could not be spoken (the response fails with it)."""

    async def run(self) -> str | None:
        """Stream the answer; the chat's finish reason once every sentence is spoken."""
        await self._session.chat(self._body(), self._read)
        rest = self._sentences.rest()
        if rest and self._audio:
            await self._say(rest)
        if self._speaker is not None:
            await self._queue.put(None)
            await self._speaker
        if self.failure is not None:
            raise self.failure
        return self._finish

    def _body(self) -> dict[str, Any]:
        options = self._reply.options
        body: dict[str, Any] = {
            "model": self._session.chat_model,
            "messages": self._session.messages(self._reply),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = [
            {
                "type": "function",
                "function": {
                    key: tool[key] for key in ("name", "description", "parameters") if key in tool
                },
            }
            for tool in options["tools"]
        ]
        if tools:
            body["tools"] = tools
            choice = options["tool_choice"]
            if isinstance(choice, dict) and isinstance(choice.get("name"), str):
                choice = {"type": "function", "function": {"name": choice["name"]}}
            if choice in ("auto", "none", "required") or isinstance(choice, dict):
                body["tool_choice"] = choice
        limit = options["max_output_tokens"]
        if type(limit) is int:
            body["max_tokens"] = limit
        return body

    async def _read(self, data: bytes) -> None:
        """The chat part's rendered stream (Server-Sent Events of chat chunks)."""
        self._sse += data
        *events, self._sse = self._sse.split(b"\n\n")
        for event in events:
            for line in event.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload and payload != b"[DONE]":
                    chunk = orjson.loads(payload)
                    if isinstance(chunk, dict):
                        await self._chunk(chunk)

    async def _chunk(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._reply.usage = _usage(usage)
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                content = delta.get("content")
                if isinstance(content, str) and content:
                    await self._said(content)
                for call in delta.get("tool_calls") or ():
                    if isinstance(call, dict):
                        await self._calling(call)
            if isinstance(choice.get("finish_reason"), str):
                self._finish = choice["finish_reason"]

    async def _said(self, text: str) -> None:
        if self._message is None:
            await self._open_message()
        self._text.append(text)
        assert self._message is not None
        kind = (
            "response.output_audio_transcript.delta"
            if self._audio
            else "response.output_text.delta"
        )
        await self._session.send_event(
            {
                "type": kind,
                "response_id": self._reply.id,
                "item_id": self._message["id"],
                "output_index": self._index,
                "content_index": 0,
                "delta": text,
            }
        )
        if self._audio:
            for sentence in self._sentences.feed(text):
                await self._say(sentence)

    async def _open_message(self) -> None:
        session, reply = self._session, self._reply
        item: dict[str, Any] = {
            "id": session.new_id("item"),
            "object": "realtime.item",
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        self._part = (
            {"type": "output_audio", "transcript": ""}
            if self._audio
            else {"type": "output_text", "text": ""}
        )
        self._message = item
        self._index = await self._added(item)
        await session.send_event(
            {
                "type": "response.content_part.added",
                "response_id": reply.id,
                "item_id": item["id"],
                "output_index": self._index,
                "content_index": 0,
                "part": self._part,
            }
        )
        item["content"].append(self._part)
        if self._audio:
            session.spoken[item["id"]] = self._spoken
            self._speaker = session.spawn(self._speak_all())

    async def _added(self, item: dict[str, Any]) -> int:
        """A new output item: in the response and the conversation, told to the caller."""
        session, reply = self._session, self._reply
        index = len(reply.output)
        previous = session.items[-1]["id"] if session.items else None
        reply.output.append(item)
        session.items.append(item)
        await session.send_event(
            {
                "type": "response.output_item.added",
                "response_id": reply.id,
                "output_index": index,
                "item": item,
            }
        )
        await session.send_event(
            {"type": "conversation.item.added", "previous_item_id": previous, "item": item}
        )
        return index

    async def _calling(self, delta: dict[str, Any]) -> None:
        place = delta.get("index", 0)
        function = delta.get("function") if isinstance(delta.get("function"), dict) else {}
        assert isinstance(function, dict)
        known = self._calls.get(place) if isinstance(place, int) else None
        if known is None:
            call_id = delta.get("id")
            item: dict[str, Any] = {
                "id": self._session.new_id("item"),
                "object": "realtime.item",
                "type": "function_call",
                "status": "in_progress",
                "call_id": call_id if isinstance(call_id, str) else self._session.new_id("call"),
                "name": function.get("name") if isinstance(function.get("name"), str) else "",
                "arguments": "",
            }
            known = (await self._added(item), item)
            self._calls[place if isinstance(place, int) else len(self._calls)] = known
        index, item = known
        name = function.get("name")
        if isinstance(name, str) and name and not item["name"]:
            item["name"] = name
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            item["arguments"] += arguments
            await self._session.send_event(
                {
                    "type": "response.function_call_arguments.delta",
                    "response_id": self._reply.id,
                    "item_id": item["id"],
                    "output_index": index,
                    "call_id": item["call_id"],
                    "delta": arguments,
                }
            )

    async def _say(self, sentence: str) -> None:
        await self._queue.put(sentence)

    async def _speak_all(self) -> None:
        """Speak each sentence in turn. A sentence refused or failed fails the response:
        it is kept as ``failure`` and the response's task cancelled (the chat part is cut
        where it is, not failed: it did nothing wrong)."""
        try:
            await self._speak_each()
        except Exception as failure:
            self.failure = failure
            if self._reply.task is not None:
                self._reply.task.cancel()

    async def _speak_each(self) -> None:
        while True:
            sentence = await self._queue.get()
            if sentence is None:
                return
            resampler: Resampler | None = None

            async def heard(pcm: bytes, rate: int) -> None:
                nonlocal resampler
                if resampler is None:
                    resampler = Resampler(rate, RATE)
                await self._audio_out(resampler.feed(pcm))

            await self._session.speak(sentence, self._reply.options["voice"], heard)
            if resampler is not None:
                await self._audio_out(resampler.finish())
            self._spoken.sentences.append((sentence, self._spoken.audio_ms))

    async def _audio_out(self, pcm: bytes) -> None:
        assert self._message is not None
        for start in range(0, len(pcm), DELTA_BYTES):
            piece = pcm[start : start + DELTA_BYTES]
            self._spoken.audio_ms += len(piece) // BYTES_PER_MS
            await self._session.send_event(
                {
                    "type": "response.output_audio.delta",
                    "response_id": self._reply.id,
                    "item_id": self._message["id"],
                    "output_index": self._index,
                    "content_index": 0,
                    "delta": base64.b64encode(piece).decode("ascii"),
                }
            )

    async def _stop_speaking(self) -> None:
        speaker = self._speaker
        if speaker is not None and not speaker.done():
            speaker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await speaker

    async def cut(self) -> None:
        """The response was cancelled: speech stops, and an audio item keeps what it
        said up to where its audio stopped (barge-in's truncation)."""
        await self._stop_speaking()
        if self._message is not None and self._audio:
            self._cut = True
            await self._session.truncate(self._message, self._spoken.audio_ms)

    async def close(self) -> None:
        """Every item opened is done (completed, or incomplete when the response was
        not), and told so."""
        await self._stop_speaking()
        session, reply = self._session, self._reply
        status = "completed" if reply.status == "completed" else "incomplete"
        message = self._message
        if message is not None:
            common = {
                "response_id": reply.id,
                "item_id": message["id"],
                "output_index": self._index,
                "content_index": 0,
            }
            text = "".join(self._text)
            if self._audio:
                if not self._cut:
                    self._part["transcript"] = text
                said = self._part["transcript"]
                await session.send_event({"type": "response.output_audio.done", **common})
                await session.send_event(
                    {"type": "response.output_audio_transcript.done", **common, "transcript": said}
                )
            else:
                self._part["text"] = text
                await session.send_event(
                    {"type": "response.output_text.done", **common, "text": text}
                )
            await session.send_event(
                {"type": "response.content_part.done", **common, "part": self._part}
            )
            await self._done(message, self._index, status)
        for index, item in self._calls.values():
            await session.send_event(
                {
                    "type": "response.function_call_arguments.done",
                    "response_id": reply.id,
                    "item_id": item["id"],
                    "output_index": index,
                    "call_id": item["call_id"],
                    "name": item["name"],
                    "arguments": item["arguments"],
                }
            )
            await self._done(item, index, status)

    async def _done(self, item: dict[str, Any], index: int, status: str) -> None:
        item["status"] = status
        await self._session.send_event(
            {
                "type": "response.output_item.done",
                "response_id": self._reply.id,
                "output_index": index,
                "item": item,
            }
        )
        await self._session.send_event({"type": "conversation.item.done", "item": item})


def _usage(usage: dict[str, Any]) -> dict[str, Any] | None:
    """The chat part's usage in a ``response.done``'s shape (all of it text)."""
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if type(prompt) is not int or type(completion) is not int:
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    cached = cached if type(cached) is int else 0
    return {
        "total_tokens": prompt + completion,
        "input_tokens": prompt,
        "output_tokens": completion,
        "input_token_details": {
            "text_tokens": prompt,
            "audio_tokens": 0,
            "cached_tokens": cached,
            "cached_tokens_details": {"text_tokens": cached, "audio_tokens": 0},
        },
        "output_token_details": {"text_tokens": completion, "audio_tokens": 0},
    }
