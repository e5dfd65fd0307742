"""Serving an app through the edge: ``EdgeRunner``.

``EdgeRunner`` is aiohttp's ``AppRunner`` whose server builds ``EdgeProtocol``
connections with Parley's bounds (``connection_options``). ``parley serve``
(``cli/serve.py``) runs one, and times the shutdown grace itself.
"""

from __future__ import annotations

import asyncio
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

    def connections_fell_by(self) -> int:
        """``EdgeServer.fell_by`` (0 before the server is made)."""
        server = self.server
        return server.fell_by() if isinstance(server, EdgeServer) else 0

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
