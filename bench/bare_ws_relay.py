"""The baseline for realtime sessions: a WebSocket relay with nothing of Parley in it.

aiohttp.web + uvloop: each caller's WebSocket (``GET /v1/realtime?…``) opens one aiohttp
client WebSocket to the upstream (same query, through one shared ``ClientSession``) and
relays every frame both ways as it arrives, each send awaited (so each side's flow
control reaches the other, as Parley's does), until either side closes. No keys, limits,
parsing, model names or metering: what Parley does on top is the difference between
the two (``bench.realtime``).

    python -m bench.bare_ws_relay --port 9102 --upstream http://127.0.0.1:9101/v1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

from bench.serving import serve

SESSION = web.AppKey("session", aiohttp.ClientSession)
UPSTREAM = web.AppKey("upstream", str)
MAX_EVENT_BYTES = 8 * 1024 * 1024
"""Parley's ``realtime.max_event_bytes``."""
UPSTREAM_HEADERS = {"Authorization": "Bearer upstream"}


async def relay(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    async for message in source:
        if message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        else:
            return


async def realtime(request: web.Request) -> web.StreamResponse:
    socket = web.WebSocketResponse(protocols=("realtime",), max_msg_size=MAX_EVENT_BYTES)
    url = request.app[UPSTREAM] + "/realtime?" + request.query_string
    async with request.app[SESSION].ws_connect(
        url, headers=UPSTREAM_HEADERS, max_msg_size=MAX_EVENT_BYTES
    ) as upstream:
        await socket.prepare(request)
        pumps = [
            asyncio.create_task(relay(socket, upstream)),
            asyncio.create_task(relay(upstream, socket)),
        ]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        for pump in pumps:
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await pump
        await socket.close()
    return socket


def make_app(upstream: str) -> web.Application:
    app = web.Application()
    app[UPSTREAM] = upstream.rstrip("/")
    app.router.add_get("/v1/realtime", realtime)

    async def session(app: web.Application) -> AsyncIterator[None]:
        app[SESSION] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(total=None),
        )
        yield
        await app[SESSION].close()

    app.cleanup_ctx.append(session)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9102)
    parser.add_argument("--upstream", default="http://127.0.0.1:9101/v1")
    args = parser.parse_args()
    serve(make_app(args.upstream), args.host, args.port)


if __name__ == "__main__":
    main()
