"""A fake Anthropic Messages API, over real HTTP, written from Anthropic's API reference.

    async with FakeAnthropic(api_key="k") as upstream:
        upstream.base_url        # "http://127.0.0.1:<port>/v1", a channel's base_url
        upstream.requests        # every request received (ReceivedRequest), oldest first

``POST /v1/messages`` (whole, or streamed with ``"stream": true``) and
``POST /v1/messages/count_tokens``. A request without ``x-api-key: <key>`` gets a 401
``authentication_error``; one without ``anthropic-version`` a 400. Errors are
Anthropic's: ``{"type": "error", "error": {"type", "message"}}``.

The reply echoes the last user message's text, word by word (``"echo: ..."``), cut at
``max_tokens`` words (``stop_reason: max_tokens``). Usage counts words:
``input_tokens`` every text word of the system and the messages, ``output_tokens`` the
words produced. Knobs, as ``+``-separated parts of the model name (or
``upstream.behaviour``, the default every request starts from):

- ``fail-N``: answer status N with the error type Anthropic uses for it (``ERROR_TYPES``).
- ``error-after-N``: a stream sends N events, then an ``overloaded_error`` event.
- ``stall-after-N``: a stream sends N events, then nothing (until the caller leaves, or
  ``STALL_SECONDS``).
- ``thinking``: the reply opens with a thinking block and its signature (``SIGNATURE``).
- ``tool``: with ``tools`` in the request, and no ``tool_result`` last, the reply calls
  the first tool with ``{"query": <the echo>}`` (``stop_reason: tool_use``).
- ``cache-R-W``: usage reports R cache-read and W cache-write input tokens.
- ``cut-after-N``: a stream sends N events, then ends its body cleanly, without
  ``message_stop``.

``Behaviour.usage`` (set on ``upstream.behaviour``) replaces counts of the usage the
reply reports, with any value (what a broken or hostile upstream may send): whole, or
streamed (the input counts in ``message_start``, ``output_tokens`` in ``message_delta``).

A stream is what the API sends: ``message_start``, ``ping``, each block's
``content_block_start`` / ``content_block_delta`` (``thinking_delta`` then
``signature_delta``, ``text_delta``, ``input_json_delta``) / ``content_block_stop``,
``message_delta`` (``stop_reason``, cumulative ``usage``) and ``message_stop``.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from aiohttp import web

from tests.upstreams.server import (
    JSON,
    FakeServer,
    input_words,
    json_reply,
    last_user_text,
    received,
)

STALL_SECONDS = 30.0
SIGNATURE = "EqQBCkYIBRgCIkB0aGUgc2lnbmF0dXJlIG9mIHRoZSB0aGlua2luZw=="
THOUGHT = ("I", " should", " echo.")
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True, slots=True)
class Behaviour:
    fail: int | None = None
    error_after: int | None = None
    stall_after: int | None = None
    thinking: bool = False
    tool: bool = False
    cache_read: int = 0
    cache_write: int = 0
    cut_after: int | None = None
    usage: JSON | None = None

    def with_model(self, model: str) -> Behaviour:
        behaviour = self
        for part in model.split("+"):
            name, _, arg = part.partition("-")
            if part == "thinking":
                behaviour = replace(behaviour, thinking=True)
            elif part == "tool":
                behaviour = replace(behaviour, tool=True)
            elif name == "fail":
                behaviour = replace(behaviour, fail=int(arg))
            elif part.startswith("error-after-"):
                behaviour = replace(behaviour, error_after=int(part.rpartition("-")[2]))
            elif part.startswith("cut-after-"):
                behaviour = replace(behaviour, cut_after=int(part.rpartition("-")[2]))
            elif part.startswith("stall-after-"):
                behaviour = replace(behaviour, stall_after=int(part.rpartition("-")[2]))
            elif name == "cache":
                read, _, write = arg.partition("-")
                behaviour = replace(behaviour, cache_read=int(read), cache_write=int(write))
        return behaviour


def error_body(kind: str, message: str) -> JSON:
    return {"type": "error", "error": {"type": kind, "message": message}}


def event(name: str, payload: JSON) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


@dataclass
class FakeAnthropic(FakeServer):
    api_key: str | None = None
    behaviour: Behaviour = field(default_factory=Behaviour)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        return app

    async def _read(self, request: web.Request) -> tuple[JSON | None, web.Response | None]:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        self.requests.append(received(request, body))
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            return None, json_reply(401, error_body("authentication_error", "invalid x-api-key"))
        if "anthropic-version" not in request.headers:
            return None, json_reply(
                400, error_body("invalid_request_error", "anthropic-version header is required")
            )
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return None, json_reply(
                400, error_body("invalid_request_error", "messages: Field required")
            )
        return body, None

    async def _count_tokens(self, request: web.Request) -> web.Response:
        body, refusal = await self._read(request)
        if refusal is not None or body is None:
            return refusal or json_reply(400, {})
        return json_reply(200, {"input_tokens": input_words(body, _texts)})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body, refusal = await self._read(request)
        if refusal is not None or body is None:
            return refusal or json_reply(400, {})
        behaviour = self.behaviour.with_model(str(body.get("model", "")))
        if behaviour.fail is not None:
            kind = ERROR_TYPES.get(behaviour.fail, "api_error")
            return json_reply(behaviour.fail, error_body(kind, f"Fake failure ({behaviour.fail})."))
        if not isinstance(body.get("max_tokens"), int):
            return json_reply(
                400, error_body("invalid_request_error", "max_tokens: Field required")
            )
        reply = self._reply(body, behaviour)
        if body.get("stream"):
            return await self._stream(request, reply, behaviour)
        return json_reply(200, reply)

    def _reply(self, body: JSON, behaviour: Behaviour) -> JSON:
        words = f"echo: {last_user_text(body, _texts)}".split()
        limit = body["max_tokens"]
        stop = "end_turn"
        if len(words) > limit:
            words, stop = words[:limit], "max_tokens"
        content: list[JSON] = []
        if behaviour.thinking:
            content.append(
                {"type": "thinking", "thinking": "".join(THOUGHT), "signature": SIGNATURE}
            )
        text = " ".join(words)
        content.append({"type": "text", "text": text})
        tools = body.get("tools")
        if behaviour.tool and tools and not _tool_result_last(body):
            name = tools[0]["name"]
            content.append(
                {"type": "tool_use", "id": f"toolu_{next(self._ids)}", "name": name,
                 "input": {"query": text}}
            )  # fmt: skip
            stop = "tool_use"
        usage = {
            "input_tokens": input_words(body, _texts),
            "cache_creation_input_tokens": behaviour.cache_write,
            "cache_read_input_tokens": behaviour.cache_read,
            "output_tokens": len(words) + (len(THOUGHT) if behaviour.thinking else 0),
            **(behaviour.usage or {}),
        }
        return {
            "id": f"msg_fake{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }

    async def _stream(
        self, request: web.Request, reply: JSON, behaviour: Behaviour
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for index, data in enumerate(_events(reply)):
            if index == behaviour.error_after:
                await response.write(event("error", error_body("overloaded_error", "Overloaded")))
                break
            if index == behaviour.cut_after:
                break
            if index == behaviour.stall_after:
                await asyncio.sleep(STALL_SECONDS)
            await response.write(data)
        await response.write_eof()
        return response


def _events(reply: JSON) -> list[bytes]:
    start = {**reply, "content": [], "stop_reason": None,
             "usage": {**reply["usage"], "output_tokens": 1}}  # fmt: skip
    out = [event("message_start", {"type": "message_start", "message": start}),
           event("ping", {"type": "ping"})]  # fmt: skip
    for index, block in enumerate(reply["content"]):
        out.extend(_block_events(index, block))
    delta = {"stop_reason": reply["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": reply["usage"]["output_tokens"]}
    out.append(event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    out.append(event("message_stop", {"type": "message_stop"}))
    return out


def _block_events(index: int, block: JSON) -> list[bytes]:
    kind = block["type"]
    empty: JSON = {
        "text": {"type": "text", "text": ""},
        "thinking": {"type": "thinking", "thinking": "", "signature": ""},
        "tool_use": {**block, "input": {}},
    }[kind]
    deltas: list[JSON]
    if kind == "text":
        words = block["text"].split(" ")
        deltas = [
            {"type": "text_delta", "text": w if i == 0 else f" {w}"} for i, w in enumerate(words)
        ]
    elif kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in THOUGHT]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        arguments = orjson.dumps(block["input"]).decode()
        middle = len(arguments) // 2
        deltas = [{"type": "input_json_delta", "partial_json": part}
                  for part in (arguments[:middle], arguments[middle:])]  # fmt: skip
    start = {"type": "content_block_start", "index": index, "content_block": empty}
    out = [event("content_block_start", start)]
    out.extend(
        event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    )
    out.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return out


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    found: list[str] = []
    for block in content or ():
        if isinstance(block, dict) and block.get("type") == "text":
            found.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "tool_result":
            found.extend(_texts(block.get("content")))
    return found


def _tool_result_last(body: JSON) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )
