"""Relaying a streamed completion to the caller as Server-Sent Events, chunk by chunk.

Parley always asks the upstream for usage (``stream_options.include_usage``) so it can
meter the stream; the caller sees the usage chunk only when it asked for it, as OpenAI
does. Whatever ends the stream (the end, an upstream failure, the caller hanging up)
the call is metered exactly once, for what was produced.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from typing import Any

import orjson
from aiohttp import web

from parley.domain.usage import Usage
from parley.errors import ParleyError, encode_error_event
from parley.pipeline.call import Call
from parley.pipeline.relay import Operation, relay_stream
from parley.pipeline.route import Route
from parley.services import Services

DONE = b"data: [DONE]\n\n"
CLIENT_CLOSED = 499
CLIENT_GONE = (ConnectionResetError, ConnectionError)


class StreamTally:
    """What a stream has produced so far, and the usage the upstream reported."""

    def __init__(self, prompt_estimate: int) -> None:
        self.prompt_estimate = prompt_estimate
        self.characters = 0
        self.pieces = 0
        self.reported: Usage | None = None

    def observe(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(completion, int):
                self.reported = Usage(prompt_tokens=prompt, completion_tokens=completion)
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict):
                produced = _choice_text(choice)
                if produced:
                    self.characters += produced
                    self.pieces += 1

    def usage(self) -> Usage:
        if self.reported is not None:
            return self.reported
        completion = max(self.pieces, (self.characters + 3) // 4)
        return Usage(
            prompt_tokens=self.prompt_estimate, completion_tokens=completion, estimated=True
        )

    @property
    def produced(self) -> bool:
        return self.pieces > 0 or self.reported is not None


def _choice_text(choice: dict[str, Any]) -> int:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        size = len(delta.get("content") or "") + len(delta.get("reasoning_content") or "")
        for call in delta.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                size += len(function.get("arguments") or "") + len(function.get("name") or "")
        return size
    text = choice.get("text")
    return len(text) if isinstance(text, str) else 0


class ChunkShaper:
    """Rewrites each upstream chunk into what the caller is owed."""

    def __init__(self, model: str, id_prefix: str, include_usage: bool) -> None:
        self._model = model
        self._prefix = id_prefix
        self._include_usage = include_usage
        self._ids: dict[str, str] = {}

    def shape(self, chunk: dict[str, Any]) -> bytes | None:
        if "usage" in chunk and not self._include_usage:
            if not chunk.get("choices"):
                return None
            del chunk["usage"]
        chunk["model"] = self._model
        chunk["id"] = self._id(chunk.get("id"))
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    def _id(self, upstream: Any) -> str:
        if isinstance(upstream, str) and upstream.startswith(self._prefix):
            return upstream
        key = upstream if isinstance(upstream, str) else ""
        if key not in self._ids:
            self._ids[key] = self._prefix + (key or secrets.token_hex(12))
        return self._ids[key]


async def stream_reply(
    request: web.Request,
    svc: Services,
    call: Call,
    *,
    routes: Sequence[Route],
    operation: Operation,
    body: dict[str, Any],
    include_usage: bool,
    id_prefix: str,
    prompt_estimate: int,
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            **call.reply_headers(),
        }
    )
    tally = StreamTally(prompt_estimate)
    shaper = ChunkShaper(call.model.spec.name, id_prefix, include_usage)
    status, channel = 200, ""
    try:
        async with relay_stream(svc.providers, routes, operation, body) as (route, chunks):
            channel = route.target.channel
            await response.prepare(request)
            async for chunk in chunks:
                tally.observe(chunk)
                event = shaper.shape(chunk)
                if event is not None:
                    await response.write(event)
            await response.write(DONE)
    except ParleyError as error:
        status = error.status
        if not response.prepared:
            raise
        await _try_write(response, encode_error_event(error) + DONE)
    except CLIENT_GONE:
        status = CLIENT_CLOSED
    except asyncio.CancelledError:
        status = CLIENT_CLOSED
        raise
    finally:
        svc.meter.finish(
            call,
            usage=tally.usage() if tally.produced else Usage(),
            status=status,
            channel=channel,
            billable=tally.produced,
        )
    return response


async def _try_write(response: web.StreamResponse, data: bytes) -> None:
    try:
        await response.write(data)
    except CLIENT_GONE:
        return
