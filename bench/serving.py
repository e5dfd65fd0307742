"""How every bench server (the fake upstreams, the bare relays) listens: uvloop, no access
log, no banner, and Parley's default accept backlog, so a run with thousands of
connections compares the servers and not their listen queues."""

from __future__ import annotations

import asyncio

import uvloop
from aiohttp import web

BACKLOG = 16384
"""Parley's default ``server.backlog``."""


def serve(
    app: web.Application,
    host: str,
    port: int,
    *,
    reuse_port: bool = False,
    backlog: int = BACKLOG,
) -> None:
    """Run ``app`` until SIGINT or SIGTERM."""
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    web.run_app(
        app,
        host=host,
        port=port,
        access_log=None,
        print=None,
        backlog=backlog,
        reuse_port=reuse_port,
    )
