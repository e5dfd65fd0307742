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

    __slots__ = ("characters", "pieces", "prompt_estimate", "reported")

    def __init__(self, prompt_estimate: int) -> None:
        self.prompt_estimate = prompt_estimate
        self.characters = 0
        self.pieces = 0
        self.reported: Usage | None = None

    def observe(self, chunk: dict[str, Any]) -> None:
        """Count what the chunk produced (this runs once per token: keep it lean)."""
        usage = chunk.get("usage")
        if usage:
            self._report(usage)
        choices = chunk.get("choices")
        if choices and type(choices) is list:
            for choice in choices:
                produced = _choice_text(choice) if type(choice) is dict else 0
                if produced:
                    self.characters += produced
                    self.pieces += 1

    def _report(self, usage: Any) -> None:
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(completion, int):
                self.reported = Usage(prompt_tokens=prompt, completion_tokens=completion)

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
    """Characters a choice produced: content, reasoning and tool-call text."""
    delta = choice.get("delta")
    if type(delta) is not dict:
        text = choice.get("text")  # a classic completion's choice
        return len(text) if type(text) is str else 0
    content = delta.get("content")
    size = len(content) if type(content) is str else 0
    reasoning = delta.get("reasoning_content")
    if type(reasoning) is str:
        size += len(reasoning)
    calls = delta.get("tool_calls")
    if calls and type(calls) is list:
        for call in calls:
            function = call.get("function") if type(call) is dict else None
            if type(function) is dict:
                size += len(function.get("arguments") or "") + len(function.get("name") or "")
    return size


class ChunkShaper:
    """Rewrites upstream chunks into the events the caller is owed."""

    __slots__ = ("_id", "_include_usage", "_model", "_prefix", "_upstream_id")

    def __init__(self, model: str, id_prefix: str, include_usage: bool) -> None:
        self._model = model
        self._prefix = id_prefix
        self._include_usage = include_usage
        self._upstream_id: object = None
        self._id = ""

    def events(self, batch: Sequence[dict[str, Any]], tally: StreamTally) -> bytes:
        """The batch, counted by ``tally``, as SSE bytes (empty when nothing is owed)."""
        shaped: list[bytes] = []
        for chunk in batch:
            tally.observe(chunk)
            if "usage" in chunk and not self._include_usage:
                if not chunk.get("choices"):
                    continue
                del chunk["usage"]
            chunk["model"] = self._model
            upstream = chunk.get("id")
            if upstream != self._upstream_id or not self._id:
                self._upstream_id, self._id = upstream, self._caller_id(upstream)
            chunk["id"] = self._id
            shaped.append(orjson.dumps(chunk))
        if not shaped:
            return b""
        return b"data: " + b"\n\ndata: ".join(shaped) + b"\n\n"

    def _caller_id(self, upstream: object) -> str:
        """The upstream's id with the caller's prefix; one made up when it sent none."""
        if isinstance(upstream, str) and upstream.startswith(self._prefix):
            return upstream
        if isinstance(upstream, str) and upstream:
            return self._prefix + upstream
        return self._id or self._prefix + secrets.token_hex(12)


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
        async with relay_stream(svc.providers, routes, operation, body) as opened:
            route, first, batches = opened
            channel = route.target.channel
            await response.prepare(request)
            await _relay_batch(response, shaper.events(first, tally))
            async for batch in batches:
                await _relay_batch(response, shaper.events(batch, tally))
            await response.write_eof(DONE)
    except ParleyError as error:
        status, channel = error.status, channel or error.channel
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


async def _relay_batch(response: web.StreamResponse, events: bytes) -> None:
    """What arrived together leaves together: one write per upstream read."""
    if events:
        await response.write(events)


async def _try_write(response: web.StreamResponse, data: bytes) -> None:
    try:
        await response.write(data)
    except CLIENT_GONE:
        return
