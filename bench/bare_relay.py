"""The baseline: the minimal relay of DESIGN.md §3, with nothing of Parley in it.

aiohttp.web + one shared ``aiohttp.ClientSession`` + uvloop + orjson. It checks that an
``Authorization`` header is present, parses the JSON body, forwards it to the upstream and
returns the reply: a whole reply is read as JSON and re-serialized; a stream is relayed
byte for byte, each piece as it arrives from the upstream (``iter_any``), through a
``StreamResponse``. No keys, limits, routing or metering: what Parley does on top is
exactly the difference between the two.

    python -m bench.bare_relay --port 9002 --upstream http://127.0.0.1:9001/v1

``--client parley`` relays through Parley's own upstream client (``parley.http``) instead
of aiohttp's, all else the same: the difference between the two bare relays is what the
client costs, and what stays between this one and Parley is the gateway's own work
(``bench.stream_cost --targets bare,bare-parley-client,parley``).

Its accept backlog is Parley's default (``server.backlog``, 16384), so a run with thousands
of connections compares the relays and not their listen queues. ``--workers N`` runs N
processes sharing the port under a supervisor, as ``parley serve --workers N`` does.
"""

from __future__ import annotations

import argparse
import multiprocessing
import signal
from collections.abc import AsyncIterator
from types import FrameType

import aiohttp
import orjson
from aiohttp import web

from bench import serving
from parley.http import HttpClient, Prepared, prepare

SESSION = web.AppKey("session", aiohttp.ClientSession)
UPSTREAM = web.AppKey("upstream", str)
UPSTREAM_HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer upstream"}
MOST = 64 * 1024 * 1024
UNAUTHORIZED = orjson.dumps({"error": {"message": "missing key", "type": "invalid_request_error"}})


async def chat_completions(request: web.Request) -> web.StreamResponse:
    if "Authorization" not in request.headers:
        return web.Response(status=401, body=UNAUTHORIZED, content_type="application/json")
    body = orjson.loads(await request.read())
    session, url = request.app[SESSION], request.app[UPSTREAM] + "/chat/completions"
    async with session.post(url, data=orjson.dumps(body), headers=UPSTREAM_HEADERS) as upstream:
        if not body.get("stream") or upstream.status != 200:
            reply = orjson.loads(await upstream.read())
            return web.Response(
                status=upstream.status, body=orjson.dumps(reply), content_type="application/json"
            )
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        async for piece in upstream.content.iter_any():
            await response.write(piece)
        await response.write_eof()
        return response


CLIENT = web.AppKey("client", HttpClient)
PREPARED = web.AppKey("prepared", Prepared)


async def chat_completions_parley_client(request: web.Request) -> web.StreamResponse:
    """``chat_completions`` through Parley's upstream client."""
    if "Authorization" not in request.headers:
        return web.Response(status=401, body=UNAUTHORIZED, content_type="application/json")
    body = orjson.loads(await request.read())
    client, prepared = request.app[CLIENT], request.app[PREPARED]
    reply = await client.send(prepared, orjson.dumps(body), connect_timeout=5, read_timeout=300)
    try:
        if not body.get("stream") or reply.status != 200:
            answer = orjson.loads(await reply.read(MOST))
            return web.Response(
                status=reply.status, body=orjson.dumps(answer), content_type="application/json"
            )
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        while piece := await reply.next_piece():
            await response.write(piece)
        await response.write_eof()
        return response
    finally:
        reply.release()


def make_app(upstream: str, client: str = "aiohttp") -> web.Application:
    app = web.Application()
    app[UPSTREAM] = upstream.rstrip("/")
    if client == "parley":
        app.router.add_post("/v1/chat/completions", chat_completions_parley_client)

        async def own_client(app: web.Application) -> AsyncIterator[None]:
            app[CLIENT] = HttpClient()
            url = app[UPSTREAM] + "/chat/completions"
            app[PREPARED] = prepare("POST", url, UPSTREAM_HEADERS)
            yield
            await app[CLIENT].close()

        app.cleanup_ctx.append(own_client)
        return app
    app.router.add_post("/v1/chat/completions", chat_completions)

    async def session(app: web.Application) -> AsyncIterator[None]:
        app[SESSION] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=300),
        )
        yield
        await app[SESSION].close()

    app.cleanup_ctx.append(session)
    return app


def serve(args: argparse.Namespace, reuse_port: bool) -> None:
    """One relay process (spawned workers get ``args`` pickled)."""
    app = make_app(args.upstream, args.client)
    serving.serve(app, args.host, args.port, reuse_port=reuse_port, backlog=args.backlog)


def serve_workers(args: argparse.Namespace) -> None:
    """``--workers N``: N relay processes sharing the port (``SO_REUSEPORT``) under this
    one, as ``parley serve --workers N`` runs them; SIGTERM here stops them all."""
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=serve, args=(args, True)) for _ in range(args.workers)]
    for worker in workers:
        worker.start()

    def stop(signum: int, frame: FrameType | None) -> None:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for worker in workers:
        worker.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9002)
    parser.add_argument("--upstream", default="http://127.0.0.1:9001/v1")
    parser.add_argument(
        "--backlog", type=int, default=16384, help="Accept backlog (Parley's default)."
    )
    parser.add_argument("--workers", type=int, default=1, help="Processes sharing the port.")
    parser.add_argument(
        "--client", choices=("aiohttp", "parley"), default="aiohttp", help="The upstream client."
    )
    args = parser.parse_args()
    if args.workers > 1:
        serve_workers(args)
    else:
        serve(args, reuse_port=False)


if __name__ == "__main__":
    main()
