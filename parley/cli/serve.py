"""The serving process behind ``parley serve`` (``run_worker``): alone, or one of
``--workers N`` sharing a port (started by ``parley/cli/supervisor.py``), serving until a
signal and shutting down within the grace. The command itself (options, checks) is
``parley/cli/serve_command.py``, which imports this module, and with it the web stack,
only once the configuration is good, and only in the process that serves."""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from aiohttp import web

from parley.app import create_app
from parley.cli.context import fail
from parley.edge.runner import EdgeRunner
from parley.heap import give_back_freed_memory
from parley.pipeline.context import SERVICES
from parley.pipeline.services import Services
from parley.settings import Settings
from parley.telemetry.access import AccessLogger, access_logger
from parley.telemetry.logs import configure_logging

log = logging.getLogger("parley")
SHUTDOWN_BACKSTOP_SECONDS = 5.0
"""Added to the grace for aiohttp's own shutdown timeout, which ``shut_down`` pre-empts."""
LEFTOVER_SECONDS = 2.0
"""At exit, how long tasks still pending after the app's cleanup get to end once cancelled."""
STREAM_END_SECONDS = 2.0
"""At the end of the grace, how long the ended streams get to write their last event (at
most half of ``server.shutdown_close_seconds``, which this time is part of)."""


def run_worker(
    raw_settings: dict[str, Any],
    reuse_port: bool,
    on_listening: Callable[[], None] | None = None,
) -> None:
    """One serving process (the settings arrive as JSON so spawned workers can take them);
    ``on_listening`` is called once it listens (the demo prints its welcome then)."""
    settings = Settings.model_validate(raw_settings)
    configure_logging(settings.server.log_format)
    _install_uvloop()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    app = create_app(settings)
    app.on_startup.append(settle_garbage_collector)  # runs after the services are built
    try:
        serving = serve_app(app, settings, reuse_port=reuse_port, on_listening=on_listening)
        loop.run_until_complete(serving)
    except OSError as error:  # the port was taken between the check and the bind
        if error.errno not in LISTEN_ERRNOS:
            raise
        fail(f"cannot listen on {settings.server.host}:{settings.server.port}: {error.strerror}", 1)
    finally:
        _cancel_leftovers(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()  # gives SIGTERM back its default action, which would kill
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopping already: exit with 0


LISTEN_ERRNOS = (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL)


async def serve_app(
    app: web.Application,
    settings: Settings,
    *,
    reuse_port: bool,
    on_listening: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` until SIGTERM or SIGINT, then shut down within the grace period;
    ``on_listening`` once the socket is bound and listening."""
    server = settings.server
    runner = EdgeRunner(  # aiohttp's AppRunner, with the edge's connections (parley/edge/)
        app,
        server,
        access_log=access_logger() if server.access_log else None,
        access_log_class=AccessLogger,
        handler_cancellation=True,
        # aiohttp's own bound, a backstop only: ``shut_down`` ends the calls at the grace.
        shutdown_timeout=server.shutdown_grace_seconds + SHUTDOWN_BACKSTOP_SECONDS,
    )
    app.cleanup_ctx.append(give_back_freed_memory(runner.connections_fell_by))
    await runner.setup()
    stopping = asyncio.Event()
    try:
        site = web.TCPSite(
            runner, server.host, server.port, reuse_port=reuse_port, backlog=server.backlog
        )
        await site.start()
        _stop_once_on_signals(asyncio.get_running_loop(), stopping, server.shutdown_grace_seconds)
        if on_listening is not None:
            on_listening()
        await stopping.wait()
    finally:
        await shut_down(runner, server.shutdown_grace_seconds)


async def shut_down(runner: web.AppRunner, grace_seconds: float) -> None:
    """Stop listening, give the calls in flight ``grace_seconds`` to finish, then end them.

    aiohttp alone waits its timeout once for a handler, then (without cancelling it)
    once more, so a grace of 10 s became 20. Here the grace is timed once. When it is
    over, every call in flight is ended by the runner (a stream with an error event and
    ``[DONE]``, billed for what was delivered; a whole reply still waiting for its
    upstream with a 503 envelope; both recorded with ``SHUTDOWN_STATUS``), then every
    connection still open is closed. Then the app's cleanup writes the usage records,
    within ``server.shutdown_close_seconds`` of the calls' end (of the grace's end, when
    calls had to be ended): ``Services.close``.
    """
    web_server = runner.server
    cleanup = asyncio.ensure_future(runner.cleanup())  # stops the sites, then waits
    done, _ = await asyncio.wait({cleanup}, timeout=grace_seconds)
    if not done:
        services = runner.app.get(SERVICES)
        stream_end = STREAM_END_SECONDS
        if services is not None:  # the closing time starts now, the streams' end part of it
            closing = services.settings.server.shutdown_close_seconds
            services.close_by = asyncio.get_running_loop().time() + closing
            stream_end = min(STREAM_END_SECONDS, closing / 2)
        await _end_calls_in_flight(services, web_server, grace_seconds, stream_end)
    await cleanup


async def _end_calls_in_flight(
    services: Services | None,
    web_server: web.Server | None,
    grace_seconds: float,
    stream_end_seconds: float,
) -> None:
    streams = len(services.in_flight) if services is not None else 0
    connections = web_server.connections if web_server is not None else []
    if not streams and not connections:
        return  # the calls are done; the cleanup is writing usage records
    log.warning(
        "shutdown grace of %gs is over: ending %d open streams, closing %d connections",
        grace_seconds,
        streams,
        len(connections),
    )
    if services is not None and streams:
        await services.in_flight.end_all(wait_seconds=stream_end_seconds)
    for connection in connections:
        connection.force_close()


def _stop_once_on_signals(
    loop: asyncio.AbstractEventLoop, stopping: asyncio.Event, grace_seconds: float
) -> None:
    """SIGTERM or SIGINT starts the graceful shutdown, said at once in the log (a Ctrl-C
    that seems ignored for the grace period gets pressed again); another one during it
    is ignored.

    aiohttp's own handlers raise ``GracefulExit`` on every signal, so a second one (a
    repeated ``kill``, or the parent's SIGTERM to a worker that already got the signal
    from systemd's cgroup kill or a terminal's Ctrl-C) aborted the shutdown midway: exit
    status 1 and every queued usage record lost. SIGKILL still stops it at once.
    """

    def stop() -> None:
        if stopping.is_set():
            log.warning("already shutting down: finishing calls and writing usage records")
            return
        log.info(
            "stopping: calls in flight have up to %gs to finish, then usage records are written",
            grace_seconds,
        )
        stopping.set()

    if sys.platform == "win32":
        return  # Windows event loops take no signal handlers
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop)


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel any task still pending once the app is cleaned up, and let each finish, for
    ``LEFTOVER_SECONDS`` at most.

    The usage records are written or spilled by then (``Services.close``): what is left
    is work the database never answered, and a database driver's connection frozen in
    mid-query can take its own timeout (30 s) to give a cancelled task back. The process
    exits without waiting for it."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if not pending:
        return
    _, stuck = loop.run_until_complete(asyncio.wait(pending, timeout=LEFTOVER_SECONDS))
    if stuck:
        log.warning(
            "%d task(s) did not end within %gs of being cancelled at exit; leaving them",
            len(stuck),
            LEFTOVER_SECONDS,
        )


GC_THRESHOLDS = (10_000, 50, 100)


async def settle_garbage_collector(app: web.Application) -> None:
    """Move everything built at start-up out of the collector's reach, and collect less often.

    Over a hundred thousand objects exist once the imports and services are up, and every
    full collection would walk all of them, a large share of CPU and of the tail latency
    under load. They live as long as the process, so freezing them loses nothing; the
    higher first threshold trades a little memory for far fewer young collections.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _install_uvloop() -> None:
    if sys.platform == "win32":
        return
    import uvloop

    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
