"""Serving an app through the edge: ``EdgeRunner`` and ``run``, Parley's ``web.run_app``.

``EdgeRunner`` is aiohttp's ``AppRunner`` whose server builds ``EdgeProtocol``
connections with Parley's bounds (``connection_options``). ``run`` serves one app on one
address until ``GracefulExit`` (raised by ``parley serve``'s signal handlers), the way
``web.run_app`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiohttp import web
from aiohttp.web_server import Server

from parley.edge.protocol import EdgeServer
from parley.edge.refusals import MAX_HEADERS, MAX_LINE_BYTES, RefusalLog
from parley.settings import ServerSettings

LINGER_SECONDS = 5.0
"""After an early reply (401, 413…), the rest of an unread body is drained this long at most."""

log = logging.getLogger("parley.edge")


def connection_options(server: ServerSettings) -> dict[str, Any]:
    """The per-connection bounds aiohttp enforces, from the settings."""
    return {
        "keepalive_timeout": server.keepalive_seconds,
        "lingering_time": LINGER_SECONDS,
        "max_line_size": MAX_LINE_BYTES,
        "max_field_size": MAX_LINE_BYTES,
        "max_headers": MAX_HEADERS,
    }


class EdgeRunner(web.AppRunner):
    """``AppRunner`` whose connections answer broken requests with the envelope."""

    def __init__(self, app: web.Application, server: ServerSettings, **kwargs: Any) -> None:
        super().__init__(app, **connection_options(server), **kwargs)
        self.refusals = RefusalLog(log)

    async def _make_server(self) -> Server:
        base = await super()._make_server()  # starts the app, as AppRunner does
        return EdgeServer(
            base.request_handler,
            request_factory=base.request_factory,
            handler_cancellation=base.handler_cancellation,
            loop=asyncio.get_running_loop(),
            refusals=self.refusals,
            **base._kwargs,  # the connection options AppRunner gathered
        )


def run(
    app: web.Application,
    server: ServerSettings,
    *,
    loop: asyncio.AbstractEventLoop,
    reuse_port: bool,
    access_log: logging.Logger | None,
) -> None:
    """Serve ``app`` on ``server.host:port`` until ``GracefulExit``, then shut down."""
    main = loop.create_task(_serve(app, server, reuse_port=reuse_port, access_log=access_log))
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        if not main.done():
            main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(main)
        _cancel_the_rest(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def _serve(
    app: web.Application,
    server: ServerSettings,
    *,
    reuse_port: bool,
    access_log: logging.Logger | None,
) -> None:
    runner = EdgeRunner(
        app,
        server,
        access_log=access_log,
        shutdown_timeout=server.shutdown_grace_seconds,
        handler_cancellation=True,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, server.host, server.port, reuse_port=reuse_port)
        await site.start()
        await asyncio.Event().wait()  # until cancelled
    finally:
        await runner.cleanup()


def _cancel_the_rest(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
