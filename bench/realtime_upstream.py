"""An instant fake OpenAI Realtime upstream for ``bench.realtime``: frames made from
precomputed pieces, nothing recorded.

``GET /v1/realtime?model=…`` upgrades to a WebSocket that opens with ``session.created``
(PCM16 at 24 kHz both ways) and answers each ``response.create`` at once, one write an
event, as OpenAI streams a response: ``response.created``, ``rate_limits.updated``,
``--deltas`` ``response.output_audio.delta`` events of ``--chunk-bytes`` of audio each
(noise, base64), and ``response.done`` with usage (fixed input, the audio sent as output at
OpenAI's 20 tokens a second). Any other client event is read and ignored. Only the
frame's text is looked at, not parsed: the upstream shares a core with the load
generator, and what it costs is taken from the relays'.

    python -m bench.realtime_upstream --port 9101 --deltas 20 --chunk-bytes 4800
"""

from __future__ import annotations

import argparse
import base64
import random

import orjson
from aiohttp import WSMsgType, web

from bench.serving import serve

PCM_RATE = 48_000
"""Bytes a second of PCM16 mono at 24 kHz."""
INPUT_TOKENS = 120
INPUT_AUDIO_TOKENS = 100
MAX_EVENT_BYTES = 16 * 1024 * 1024
RATE_LIMITS = orjson.dumps(
    {
        "type": "rate_limits.updated",
        "event_id": "event_rl",
        "rate_limits": [
            {"name": "requests", "limit": 5000, "remaining": 4999, "reset_seconds": 0.01},
            {"name": "tokens", "limit": 40000, "remaining": 39000, "reset_seconds": 1.5},
        ],
    }
).decode()


def session_created(model: str) -> str:
    audio = {"format": {"type": "audio/pcm", "rate": 24000}}
    session = {
        "type": "realtime",
        "object": "realtime.session",
        "id": "sess_bench",
        "model": model,
        "output_modalities": ["audio"],
        "max_output_tokens": "inf",
        "audio": {
            "input": {**audio, "turn_detection": None},
            "output": {**audio, "voice": "alloy"},
        },
    }
    created = {"type": "session.created", "event_id": "event_0", "session": session}
    return orjson.dumps(created).decode()


class Frames:
    """One response's frames, but for its id (``%s``), made once."""

    def __init__(self, deltas: int, chunk_bytes: int) -> None:
        self.deltas = deltas
        # Noise, not silence: what permessage-deflate (``--compress``) gets is real audio's.
        audio = base64.b64encode(random.Random(0).randbytes(chunk_bytes)).decode()
        self.created = (
            '{"type":"response.created","event_id":"event_c","response":{"id":"%s",'
            '"object":"realtime.response","status":"in_progress","output":[],"usage":null}}'
        )
        self.delta = (
            '{"type":"response.output_audio.delta","event_id":"event_d","response_id":"%s",'
            '"item_id":"item_1","output_index":0,"content_index":0,"delta":"' + audio + '"}'
        )
        output_tokens = deltas * chunk_bytes * 20 // PCM_RATE
        usage = {
            "total_tokens": INPUT_TOKENS + output_tokens,
            "input_tokens": INPUT_TOKENS,
            "output_tokens": output_tokens,
            "input_token_details": {
                "text_tokens": INPUT_TOKENS - INPUT_AUDIO_TOKENS,
                "audio_tokens": INPUT_AUDIO_TOKENS,
                "cached_tokens": 0,
            },
            "output_token_details": {"text_tokens": 0, "audio_tokens": output_tokens},
        }
        self.done = (
            '{"type":"response.done","event_id":"event_e","response":{"id":"%s",'
            '"object":"realtime.response","status":"completed","output":[],"usage":'
            + orjson.dumps(usage).decode().replace("%", "%%")
            + "}}"
        )


FRAMES = web.AppKey("frames", Frames)


async def realtime(request: web.Request) -> web.StreamResponse:
    frames = request.app[FRAMES]
    socket = web.WebSocketResponse(max_msg_size=MAX_EVENT_BYTES)
    await socket.prepare(request)
    await socket.send_str(session_created(request.query.get("model", "")))
    turns = 0
    async for message in socket:
        if message.type != WSMsgType.TEXT or '"response.create"' not in message.data[:64]:
            continue
        turns += 1
        response_id = f"resp_{turns}"
        await socket.send_str(frames.created % response_id)
        await socket.send_str(RATE_LIMITS)
        delta = frames.delta % response_id
        for _ in range(frames.deltas):
            await socket.send_str(delta)
        await socket.send_str(frames.done % response_id)
    return socket


def make_app(deltas: int, chunk_bytes: int) -> web.Application:
    app = web.Application()
    app[FRAMES] = Frames(deltas, chunk_bytes)
    app.router.add_get("/v1/realtime", realtime)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9101)
    parser.add_argument("--deltas", type=int, default=20, help="Audio deltas a response.")
    parser.add_argument("--chunk-bytes", type=int, default=4800, help="Audio bytes a delta.")
    args = parser.parse_args()
    serve(make_app(args.deltas, args.chunk_bytes), "127.0.0.1", args.port)


if __name__ == "__main__":
    main()
