"""An instant fake OpenAI-compatible upstream for load runs: every reply is precomputed bytes.

``POST /v1/chat/completions`` answers a fixed ``chat.completion`` (with ``usage``) at once;
with ``"stream": true`` it sends ``CHUNKS`` content chunks (one write each, as an engine
would), then a usage chunk when ``stream_options.include_usage`` is true, then
``data: [DONE]``. A request whose model name contains ``slow`` is streamed slowly: its
content chunks ``--slow-delay`` (0.1 s) apart, as a model producing tokens (the
``--slow-streams`` mode of ``bench.load``). Nothing is recorded, nothing is checked but
the JSON body.

``POST /v1/messages`` is Anthropic's Messages API, for a channel of ``type: anthropic``:
a fixed ``message``, or a stream of the same ``CHUNKS`` words as ``text_delta`` events
(the opening events in the first write, each delta in its own, the closing events in the
last), with usage in ``message_start`` and ``message_delta``.

With ``--joined`` a stream is sent in one write (the same bytes): the upstream then costs a
third of the CPU per stream, but the relay reads the whole stream at once, which a real
engine, producing tokens over time, never does.

    python -m bench.upstream --port 9001     # from the repo root
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import orjson
from aiohttp import web

from bench.serving import serve

CHUNKS = 20
CREATED = 1_700_000_000
MODEL = "fake-model"
WORDS = [f"word{index} " for index in range(CHUNKS)]
USAGE = {"prompt_tokens": 9, "completion_tokens": CHUNKS, "total_tokens": 9 + CHUNKS}

PLAIN = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": CREATED,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(WORDS)},
                "finish_reason": "stop",
            }
        ],
        "usage": USAGE,
    }
)


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _chunk(index: int) -> bytes:
    delta: dict[str, str] = {"content": WORDS[index]}
    if index == 0:
        delta = {"role": "assistant", **delta}
    finish = "stop" if index == CHUNKS - 1 else None
    return _event(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


STREAM_CHUNKS = tuple(_chunk(index) for index in range(CHUNKS))
USAGE_CHUNK = _event(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "choices": [],
        "usage": USAGE,
    }
)
DONE = b"data: [DONE]\n\n"
JSON_HEADERS = {"Content-Type": "application/json"}
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


WITH_USAGE = (*STREAM_CHUNKS, USAGE_CHUNK, DONE)
WITHOUT_USAGE = (*STREAM_CHUNKS, DONE)
MAX_BODY = 64 * 1024 * 1024
"""Bodies as large as Parley sends on (its own limit is 25 MiB, a translation adds some)."""
JOINED = web.AppKey("joined", bool)
SLOW_DELAY = web.AppKey("slow_delay", float)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    if not body.get("stream"):
        return web.Response(body=PLAIN, headers=JSON_HEADERS)
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    pieces = WITH_USAGE if include_usage else WITHOUT_USAGE
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    if "slow" in str(body.get("model")):
        await slow_stream(response, pieces, request.app[SLOW_DELAY])
    elif request.app[JOINED]:
        await response.write(b"".join(pieces))
    else:
        for piece in pieces:
            await response.write(piece)
    await response.write_eof()
    return response


async def slow_stream(
    response: web.StreamResponse, pieces: tuple[bytes, ...], delay: float
) -> None:
    """Each content chunk ``delay`` seconds after the last, as a model producing tokens."""
    for index, piece in enumerate(pieces):
        if 0 < index < CHUNKS:
            await asyncio.sleep(delay)
        await response.write(piece)


def _message_event(name: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


MESSAGE_USAGE = {"input_tokens": 9, "output_tokens": CHUNKS}
MESSAGE = {
    "id": "msg_bench",
    "type": "message",
    "role": "assistant",
    "model": MODEL,
    "content": [{"type": "text", "text": "".join(WORDS)}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": MESSAGE_USAGE,
}
MESSAGE_PLAIN = orjson.dumps(MESSAGE)
MESSAGE_STREAM = (
    _message_event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                **MESSAGE,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 9, "output_tokens": 1},
            },
        },
    )
    + _message_event("ping", {"type": "ping"})
    + _message_event(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    *(
        _message_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": word},
            },
        )
        for word in WORDS
    ),
    _message_event("content_block_stop", {"type": "content_block_stop", "index": 0})
    + _message_event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": CHUNKS},
        },
    )
    + _message_event("message_stop", {"type": "message_stop"}),
)


async def messages(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    if not body.get("stream"):
        return web.Response(body=MESSAGE_PLAIN, headers=JSON_HEADERS)
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    if request.app[JOINED]:
        await response.write(b"".join(MESSAGE_STREAM))
    else:
        for piece in MESSAGE_STREAM:
            await response.write(piece)
    await response.write_eof()
    return response


def make_app(joined: bool = False, slow_delay: float = 0.1) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    app[JOINED] = joined
    app[SLOW_DELAY] = slow_delay
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/messages", messages)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--joined", action="store_true", help="Send each stream in one write.")
    parser.add_argument(
        "--slow-delay", type=float, default=0.1, help="Seconds between a slow stream's chunks."
    )
    args = parser.parse_args()
    serve(make_app(args.joined, args.slow_delay), args.host, args.port)


if __name__ == "__main__":
    main()
