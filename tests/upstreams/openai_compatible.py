"""A fake OpenAI-compatible engine (think vLLM), served over real HTTP for Parley's tests.

Start it as an async context manager (or ``await engine.start()`` / ``await engine.stop()``)::

    async with FakeEngine() as engine:
        engine.base_url          # "http://127.0.0.1:<free port>/v1", for a channel's base_url
        engine.requests          # every request received, oldest first (ReceivedRequest)

Endpoints: ``POST /v1/embeddings`` (``tests/upstreams/embeddings.py``), ``POST
/v1/responses`` (OpenAI's Responses API, ``tests/upstreams/responses_api.py``), and
``POST /v1/chat/completions`` and ``POST /v1/completions``, whole or streamed
(``"stream": true``: SSE ``data: {chunk}`` events ending with ``data: [DONE]``), and
``GET /v1/models`` (``engine.models``). With ``FakeEngine(api_key="k")`` any request not
carrying ``Authorization: Bearer k`` gets a 401 envelope. ``FakeEngine(record_requests=False)``
keeps no record (for load runs).

Replies are deterministic (``tests/upstreams/completion_script.py`` writes them): an echo
of the last user message (or the prompt), word by word, cut by ``max_tokens``, with usage
counted in words. Ids count up per engine; ``created`` is ``CREATED``.

Knobs: the upstream model name, as ``+``-separated parts (``"slow-0.05+no-usage"``); any
other model name behaves normally and is echoed in replies. ``engine.behaviour`` (a
``Behaviour``) is the default every request starts from, for tests going through Parley.

- ``fail-N``: answer status N with an OpenAI error envelope, message
  ``"Fake engine failure (status N)."`` (before any stream starts).
- ``retry-after-S``: with ``fail-N``, the error carries ``retry-after: S`` (as a 429 does).
- ``hang-S``: wait S seconds (at most ``MAX_HANG``) before answering.
- ``stall-N``: after N stream chunks, say nothing more (for ``MAX_HANG`` seconds).
- ``slow-S``: wait S seconds before each streamed chunk.
- ``words-N``: reply with N words of a fixed sentence instead of the echo.
- ``no-usage``: never send the usage chunk, even when asked (like some engines).
- ``cut-N``: after N stream chunks, end the body cleanly without ``[DONE]``.
- ``drop-N``: after N stream chunks, drop the TCP connection mid-body.
- ``error-after-N``: after N stream chunks, send ``MID_STREAM_ERROR`` (an error envelope
  whose ``code`` is null) as an event, then ``[DONE]``.
- ``junk``: answer 200 with a JSON array (a ``data: ["junk"]`` event when streaming).
- ``joined``: send a whole stream (up to a ``cut``, ``error-after`` or ``[DONE]``) in one
  write, so the client reads many events at once.
- ``overflow``: answer 400 with OpenAI's own envelope for a prompt over the context
  window (``CONTEXT_OVERFLOW``: type, ``param`` and ``code`` ``context_length_exceeded``).
- ``leak``: the error envelopes of ``fail-N`` and ``error-after-N`` quote the request's
  ``Authorization`` header in their message and carry the bare key as ``param`` (as a
  careless proxy would); a mid-stream error's ``code`` becomes 400, as vLLM reports it.
- ``huge-event-N``: stream ``HUGE_AFTER`` chunks, then a ``data:`` line of N bytes that
  never ends, written in ``HUGE_WRITE`` pieces (then the connection ends).
- ``huge-reply-N``: a whole reply whose content is N bytes, sent chunked (no length).
- ``floats-only``, ``base64-only``: embeddings in that encoding whatever was asked (an
  engine that ignores ``encoding_format``).
- ``usage-negative``, ``usage-inflated``, ``usage-absent``: report ``NEGATIVE_USAGE`` or
  ``INFLATED_USAGE`` instead of the count (whole replies and the stream's usage chunk), or
  no usage at all (whole replies too, unlike ``no-usage``); ``Behaviour.reported`` sets
  any other usage object.
- ``overlong``: ignore ``max_tokens`` (the whole echo, or ``words-N``, is sent).
- ``tools``: a chat request that offers tools gets a call of the first one
  (``completion_script.py``).
- ``reasoning``: a chat reply thinks first (``reasoning_content``, counted as reasoning
  tokens; ``completion_script.py``).
- ``cached-N``: usage reports N of the prompt's tokens (at most all) as cached
  (``prompt_tokens_details.cached_tokens``).
- ``leak-<spelling>``: like ``leak``, with the key written in one of the forms of
  ``tests/upstreams/key_spellings.py`` (``leak-basic``, ``leak-zero_width``...), in the
  message and as ``param``.
- ``deep-N``: the whole reply (or, streamed, the third chunk) carries a ``nested`` field
  that makes its JSON N levels deep, written by hand (``orjson`` writes at most 255).

Every reply sets a cookie (``engine-session``), as providers behind a CDN do.

Counters: ``cancelled_streams`` (streams whose client went away before the end, seen as a
failed write or the handler's cancellation), ``cancelled_requests`` (the same for whole
replies, e.g. while hanging), ``completed_streams`` (streams that sent ``[DONE]``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

import orjson
from aiohttp import web

from tests.upstreams import responses_api
from tests.upstreams.completion_script import (
    CREATED,
    Kind,
    Script,
    chunks_for,
    script_for,
    whole_reply,
)
from tests.upstreams.embeddings import embedding_reply
from tests.upstreams.key_spellings import spellings
from tests.upstreams.server import (
    JSON,
    FakeServer,
    authorized,
    json_reply,
    openai_error,
    received,
    sse_data,
)

MAX_HANG = 30.0
DEFAULT_MODELS = ("fake-model",)

HUGE_AFTER = 3
HUGE_WRITE = 64 * 1024
DEEP_CHUNK = 2
CONTEXT_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 4096 tokens. However, your "
        "messages resulted in 5000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}

MID_STREAM_ERROR = openai_error("The engine failed.", "server_error")
NEGATIVE_USAGE = {"prompt_tokens": -1_000_000, "completion_tokens": 1, "total_tokens": -999_999}
INFLATED_USAGE = {
    "prompt_tokens": 1_000_000_000,
    "completion_tokens": 1_000_000_000,
    "total_tokens": 2_000_000_000,
}


_NUMERIC_KNOBS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "fail": ("fail", int),
    "retry-after": ("retry_after", float),
    "stall": ("stall_after", int),
    "hang": ("hang", lambda arg: min(float(arg), MAX_HANG)),
    "slow": ("delay", float),
    "words": ("words", int),
    "cut": ("cut_after", int),
    "drop": ("drop_after", int),
    "error-after": ("error_after", int),
    "huge-event": ("huge_event", int),
    "huge-reply": ("huge_reply", int),
    "cached": ("cached", int),
}
"""Knobs with a number (``name-N``): the ``Behaviour`` field each sets, and its parser."""


@dataclass(frozen=True, slots=True)
class Behaviour:
    """How the engine answers; every field is also a model-name knob (module docstring)."""

    fail: int | None = None
    retry_after: float | None = None
    hang: float = 0.0
    stall_after: int | None = None
    delay: float = 0.0
    words: int | None = None
    usage: bool = True
    cut_after: int | None = None
    drop_after: int | None = None
    error_after: int | None = None
    junk: bool = False
    joined: bool = False
    overflow: bool = False
    leak: bool = False
    huge_event: int | None = None
    huge_reply: int | None = None
    embedding_encoding: str | None = None
    reported: JSON | None = None
    overlong: bool = False
    tools: bool = False
    reasoning: bool = False
    cached: int = 0
    spelling: str | None = None
    deep: int | None = None

    def with_model(self, model: str) -> Behaviour:
        behaviour = self
        for part in model.split("+"):
            behaviour = behaviour._with_knob(part)
        return behaviour

    def _with_knob(self, part: str) -> Behaviour:
        flags = {
            "no-usage": {"usage": False},
            "junk": {"junk": True},
            "joined": {"joined": True},
            "overflow": {"overflow": True},
            "leak": {"leak": True},
            "floats-only": {"embedding_encoding": "float"},
            "base64-only": {"embedding_encoding": "base64"},
            "usage-negative": {"reported": NEGATIVE_USAGE},
            "usage-inflated": {"reported": INFLATED_USAGE},
            "usage-absent": {"reported": {}},
            "overlong": {"overlong": True},
            "tools": {"tools": True},
            "reasoning": {"reasoning": True},
        }
        if part in flags:
            return replace(self, **flags[part])
        name, _, arg = part.rpartition("-")
        numeric = _NUMERIC_KNOBS.get(name)
        try:
            if numeric is not None:
                field_name, parse = numeric
                return replace(self, **{field_name: parse(arg)})
        except ValueError:
            pass
        return self._with_hostile_knob(name, arg)

    def _with_hostile_knob(self, name: str, arg: str) -> Behaviour:
        """``leak-<spelling>`` and ``deep-N``."""
        if name == "leak":
            return replace(self, leak=True, spelling=arg)
        if name == "deep" and arg.isdigit():
            return replace(self, deep=int(arg))
        return self


@dataclass
class FakeEngine(FakeServer):
    handler_cancellation: ClassVar[bool] = True

    api_key: str | None = None
    record_requests: bool = True
    behaviour: Behaviour = field(default_factory=Behaviour)
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))
    cancelled_streams: int = 0
    cancelled_requests: int = 0
    completed_streams: int = 0
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _stream_cancelled: asyncio.Event = field(default_factory=asyncio.Event)

    def application(self) -> web.Application:
        app = web.Application()
        app.on_response_prepare.append(_set_cookie)
        app.router.add_post("/v1/chat/completions", self._endpoint("chat"))
        app.router.add_post("/v1/completions", self._endpoint("completion"))
        app.router.add_post("/v1/embeddings", self._endpoint("embedding"))
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_get("/v1/models", self._list_models)
        return app

    async def wait_for_cancelled_streams(self, count: int = 1) -> None:
        """Wait until at least ``count`` streams were cut by their client (bound it yourself)."""
        while self.cancelled_streams < count:
            self._stream_cancelled.clear()
            await self._stream_cancelled.wait()

    def _endpoint(self, kind: Kind) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._answer(request, kind)

        return handle

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        """OpenAI's Responses API, served natively (``tests/upstreams/responses_api.py``)."""
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        self._record(request, body)
        refusal = self._refusal(request, body)
        if refusal is not None:
            return refusal
        behaviour = self.behaviour.with_model(str(body.get("model", "")))
        if behaviour.fail is not None:
            message = f"Fake engine failure (status {behaviour.fail})."
            return _error(behaviour.fail, message, "server_error", None)
        return await responses_api.answer(request, body, next(self._ids))

    async def _list_models(self, request: web.Request) -> web.Response:
        self._record(request, None)
        data = [
            {"id": m, "object": "model", "created": CREATED, "owned_by": "fake"}
            for m in self.models
        ]
        return json_reply(200, {"object": "list", "data": data})

    async def _answer(self, request: web.Request, kind: Kind) -> web.StreamResponse:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        self._record(request, body)
        refusal = self._refusal(request, body)
        if refusal is not None:
            return refusal
        behaviour = self.behaviour.with_model(str(body.get("model", "")))
        if behaviour.overflow:
            return json_reply(400, CONTEXT_OVERFLOW)
        if behaviour.fail is not None:
            kind_of_error = "invalid_request_error" if behaviour.fail < 500 else "server_error"
            message = f"Fake engine failure (status {behaviour.fail})."
            if behaviour.leak:
                spilled = leaked(request, message, None, behaviour.spelling)
                return json_reply(behaviour.fail, spilled)
            refused = _error(behaviour.fail, message, kind_of_error, None)
            if behaviour.retry_after is not None:
                refused.headers["retry-after"] = f"{behaviour.retry_after:g}"
            return refused
        stream = bool(body.get("stream"))
        try:
            return await self._serve(request, kind, body, behaviour, stream)
        except asyncio.CancelledError:
            self._count_cancelled(stream)
            raise

    def _refusal(self, request: web.Request, body: Any) -> web.Response | None:
        if not authorized(request, self.api_key):
            return _error(
                401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
            )
        if not isinstance(body, dict):
            return _error(400, "The body is not a JSON object.", "invalid_request_error", None)
        return None

    async def _serve(
        self, request: web.Request, kind: Kind, body: JSON, behaviour: Behaviour, stream: bool
    ) -> web.StreamResponse:
        if behaviour.hang:
            await asyncio.sleep(behaviour.hang)
        if kind == "embedding":
            reply = (
                ["junk"]
                if behaviour.junk
                else embedding_reply(body, behaviour.usage, behaviour.embedding_encoding)
            )
            return json_reply(200, reply)
        reply_id = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-fake{next(self._ids)}"
        script = script_for(
            kind,
            body,
            behaviour.words,
            reply_id,
            reported=behaviour.reported,
            overlong=behaviour.overlong,
            tools=behaviour.tools,
            reasoning=behaviour.reasoning,
        )
        if behaviour.cached:
            script = replace(script, cached_tokens=behaviour.cached)
        if behaviour.junk and not stream:
            return json_reply(200, ["junk"])
        if behaviour.huge_reply is not None and not stream:
            return await _huge_reply(request, script, behaviour.huge_reply)
        if not stream:
            reply = whole_reply(script)
            if behaviour.deep is not None:
                raw = deep_json(reply, behaviour.deep)
                return web.Response(body=raw, content_type="application/json")
            return json_reply(200, reply)
        return await self._stream(request, script, body, behaviour)

    async def _stream(
        self, request: web.Request, script: Script, body: JSON, behaviour: Behaviour
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        options = body.get("stream_options")
        with_usage = (
            behaviour.usage and isinstance(options, dict) and bool(options.get("include_usage"))
        )
        chunks = [["junk"]] if behaviour.junk else chunks_for(script, with_usage)
        try:
            if behaviour.huge_event is not None:
                await _huge_event(response, chunks[:HUGE_AFTER], behaviour.huge_event)
                return response
            outcome = await _send(request, response, chunks, behaviour)
        except ConnectionResetError:
            self._count_cancelled(True)
            return response
        if outcome == "done":
            self.completed_streams += 1
        return response

    def _record(self, request: web.Request, body: Any) -> None:
        if self.record_requests:
            self.requests.append(received(request, body))

    def _count_cancelled(self, stream: bool) -> None:
        if stream:
            self.cancelled_streams += 1
            self._stream_cancelled.set()
        else:
            self.cancelled_requests += 1


async def _send(
    request: web.Request, response: web.StreamResponse, chunks: list[Any], behaviour: Behaviour
) -> Literal["done", "cut", "dropped"]:
    held: list[bytes] = []

    async def send(event: bytes) -> None:
        if behaviour.joined:
            held.append(event)
        else:
            await response.write(event)

    for index, chunk in enumerate(chunks):
        if index == behaviour.cut_after:
            await response.write(b"".join(held))
            return "cut"
        if index == behaviour.drop_after and request.transport is not None:
            request.transport.close()
            return "dropped"
        if index == behaviour.error_after:
            error = (
                leaked(request, "The engine failed.", 400, behaviour.spelling)
                if behaviour.leak
                else MID_STREAM_ERROR
            )
            await send(sse_data(error))
            break
        if index == behaviour.stall_after:
            await asyncio.sleep(MAX_HANG)
        if behaviour.delay:
            await asyncio.sleep(behaviour.delay)
        if index == DEEP_CHUNK and behaviour.deep is not None:
            await send(b"data: " + deep_json(chunk, behaviour.deep) + b"\n\n")
            continue
        await send(sse_data(chunk))
    await send(b"data: [DONE]\n\n")
    await response.write(b"".join(held))
    return "done"


def leaked(request: web.Request, message: str, code: int | None, spelling: str | None) -> JSON:
    """An error envelope that gives the request's credentials away (the ``leak`` knobs)."""
    authorization = request.headers.get("Authorization", "")
    key = authorization.removeprefix("Bearer ")
    if spelling is not None:
        spelled = spellings(key)[spelling]
        quoted = f"{message} The key you sent, {spelled}, is not valid here."
        return openai_error(quoted, "invalid_request_error", param=spelled, code=code)
    quoted = f"{message} Request headers: Authorization: {authorization}; key={key}"
    return openai_error(quoted, "invalid_request_error", param=key, code=code)


def deep_json(payload: JSON, depth: int) -> bytes:
    """``payload`` as JSON, with a ``nested`` field making it ``depth`` levels deep."""
    marker = "\u0000nested\u0000"
    raw = orjson.dumps({**payload, "nested": marker})
    levels = depth - 1
    return raw.replace(orjson.dumps(marker), b"[" * levels + b"]" * levels)


async def _huge_event(response: web.StreamResponse, chunks: list[Any], size: int) -> None:
    """The ``huge-event-N`` knob: a few chunks, then one ``data:`` line that never ends."""
    for chunk in chunks:
        await response.write(sse_data(chunk))
    await response.write(b"data: ")
    for start in range(0, size, HUGE_WRITE):
        await response.write(b"x" * min(HUGE_WRITE, size - start))


async def _huge_reply(request: web.Request, script: Script, size: int) -> web.StreamResponse:
    """The ``huge-reply-N`` knob: a whole reply of N bytes of content, with no length."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    reply = whole_reply(script)
    reply["choices"][0]["message"]["content"] = "@"
    head, tail = orjson.dumps(reply).split(b"@")
    try:
        await response.write(head)
        for start in range(0, size, HUGE_WRITE):
            await response.write(b"y" * min(HUGE_WRITE, size - start))
        await response.write(tail)
        await response.write_eof()
    except ConnectionResetError:
        pass
    return response


async def _set_cookie(request: web.Request, response: web.StreamResponse) -> None:
    """Like a provider behind a CDN: every reply sets a cookie a client must not replay."""
    response.headers.add("Set-Cookie", "engine-session=s3cr3t; Path=/")


def _error(status: int, message: str, kind: str, code: str | None) -> web.Response:
    return json_reply(status, openai_error(message, kind, code=code))


async def serve_forever(port: int) -> None:
    """Run an engine on ``port`` until cancelled (for subprocess tests and the benchmark)."""
    async with FakeEngine(port=port, record_requests=False) as engine:
        print(engine.base_url, flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    import sys

    asyncio.run(serve_forever(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
